// Package idemgrpc applies idem's contract to unary gRPC calls: a server
// interceptor that runs each protected call at most once per (scope, key)
// in the store's transaction and replays its answer, and a client
// interceptor that sends one key per call intent. The contract is the one
// docs/DESIGN.md states for HTTP; docs/GRPC.md has the table of codes.
//
//	guard, _ := idem.New(store, nil)
//	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(
//		authenticate, // calls idem.WithPrincipal(ctx, "user:42")
//		idemgrpc.UnaryServerInterceptor(guard, &idemgrpc.Config{
//			Methods: map[string]idemgrpc.MethodOptions{"/bank.v1.Transfers/Transfer": {}},
//		}),
//	))
//
// # What happens to a call
//
// Calls of methods not named in Config.Methods pass through untouched. A
// protected call:
//
//   - carries its key in the request metadata entry idempotency-key, bare
//     (abc) or as an RFC 8941 sf-string ("abc"), validated as idem.ParseKey
//     does for HTTP. A missing entry is InvalidArgument (or, on an Optional
//     method, runs unprotected); two values or an invalid one are
//     InvalidArgument.
//   - is scoped by the principal that the authentication interceptor
//     stored with idem.WithPrincipal (the same accessor as for HTTP, so
//     that one authentication layer serves both). A call without one is
//     refused with Internal, unless the method or Config allows anonymous
//     callers.
//   - is fingerprinted by its full method name and the deterministic
//     protobuf encoding of its request message: the same key with another
//     request is FailedPrecondition, reason IDEMPOTENCY_KEY_REUSED.
//   - runs its handler inside the store's transaction (reach it with
//     sqlitestore.TxFrom, pgstore.TxFrom, memstore.TxFrom). An OK answer is
//     recorded as the response message's bytes; an error whose code
//     Config.Final accepts (by default the business codes:
//     InvalidArgument, NotFound, FailedPrecondition, ...) is recorded as
//     its status with its details. Unknown, Internal, Unavailable,
//     DeadlineExceeded, Canceled, ResourceExhausted, Aborted and DataLoss
//     roll the effect back and record nothing. A panic rolls back and goes
//     on.
//   - when its key holds a record, gets the recorded answer (the same
//     message bytes, or the same status and details), with the response
//     header metadata idempotent-replayed: true (also in the trailer of an
//     error, which gRPC may send as trailers only).
//   - when its key is held by a running call, is refused at once with
//     Aborted, reason IDEMPOTENCY_KEY_IN_FLIGHT and a RetryInfo.
//   - when the store fails, is refused with Unavailable, reason
//     IDEMPOTENCY_STORE_UNAVAILABLE and a RetryInfo: fail closed.
//
// Refusals of the interceptor carry an ErrorInfo in ErrorDomain whose
// reason (see Reason) tells them apart from the handler's own answers.
//
// # Clients and gRPC's retries
//
// UnaryClientInterceptor attaches the key of the call's intent (WithKey)
// or a new one made for the call. A client interceptor runs once per call,
// above the ClientConn's retry policy, so every attempt gRPC makes for the
// call carries the same metadata, and a retry policy that retries
// UNAVAILABLE and ABORTED retries safely. Retries the application makes by
// calling again must pass the intent's key with WithKey.
//
// # Observability
//
// Each protected call ends in one idem.Outcome, logged with slog at the
// outcome's level (with idem.KeyHash, never the key) and passed to
// Config.Observer as an idem.Event whose Transport is idem.TransportGRPC:
// one observer (idemprom, idemotel) serves both transports and tells them
// apart.
package idemgrpc
