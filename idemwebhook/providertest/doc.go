// Package providertest checks idemwebhook's verifiers against signatures
// made by the providers' own published Go code. It is a module of its own,
// so that the core module's go.mod does not grow with the providers'
// libraries; it holds tests only.
package providertest
