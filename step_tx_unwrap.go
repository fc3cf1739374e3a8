package idem

// StepTx returns the store's transaction of the local step that t shows
// to the work, so that packages which write through a store's own
// transaction types (outbox.Stage) find it in a step as in atomic work.
func (t stepTx) StepTx() StepTx { return t.st }
