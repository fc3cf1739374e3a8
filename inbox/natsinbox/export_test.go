package natsinbox

import "github.com/idemkit/idem/inbox"

// SetAfterProcess has Consume and Handle call f between Process and the
// ack, for the test that kills its process there.
func SetAfterProcess(c *Config, f func(inbox.Outcome)) { c.afterProcess = f }
