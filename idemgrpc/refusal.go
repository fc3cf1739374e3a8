package idemgrpc

import (
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"
)

// ErrorDomain is the domain of the ErrorInfo detail that the interceptor's
// own refusals carry; their Reason is one of the Reason constants. Clients
// branch on the reason, since a code alone (FailedPrecondition, say) may
// also be a business answer of the handler.
const ErrorDomain = "idem.idemkit.dev"

// Reasons of the interceptor's refusals (ErrorInfo.Reason).
const (
	// ReasonMissingKey: InvalidArgument, the method requires a key.
	ReasonMissingKey = "IDEMPOTENCY_KEY_MISSING"
	// ReasonInvalidKey: InvalidArgument, the key is malformed or repeated.
	ReasonInvalidKey = "IDEMPOTENCY_KEY_INVALID"
	// ReasonInFlight: Aborted with RetryInfo, another call holds the key.
	ReasonInFlight = "IDEMPOTENCY_KEY_IN_FLIGHT"
	// ReasonKeyReused: FailedPrecondition, the key was used with another
	// request.
	ReasonKeyReused = "IDEMPOTENCY_KEY_REUSED"
	// ReasonUnavailable: Unavailable with RetryInfo, the store failed.
	ReasonUnavailable = "IDEMPOTENCY_STORE_UNAVAILABLE"
	// ReasonNoPrincipal: Internal, the call has no principal.
	ReasonNoPrincipal = "IDEMPOTENCY_NO_PRINCIPAL"
	// ReasonResponseTooLarge: Internal, the response could not be
	// recorded and was rolled back.
	ReasonResponseTooLarge = "IDEMPOTENCY_RESPONSE_TOO_LARGE"
)

// refusal is one of the interceptor's own answers: code, an ErrorInfo with
// reason, and a RetryInfo when retryAfter is positive.
func refusal(code codes.Code, reason, msg string, retryAfter time.Duration) error {
	st := status.New(code, "idemgrpc: "+msg)
	details := []protoadapt.MessageV1{&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain}}
	if retryAfter > 0 {
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(retryAfter)})
	}
	if with, err := st.WithDetails(details...); err == nil {
		st = with
	}
	return st.Err()
}

// Reason returns the ErrorInfo reason of one of the interceptor's refusals,
// or "" if err is not one.
func Reason(err error) string {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Domain == ErrorDomain {
			return info.Reason
		}
	}
	return ""
}

// RetryDelay returns the delay of the RetryInfo detail of err, and whether
// it has one.
func RetryDelay(err error) (time.Duration, bool) {
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.RetryDelay != nil {
			return ri.RetryDelay.AsDuration(), true
		}
	}
	return 0, false
}

// decodeStatus decodes a recorded error answer.
func decodeStatus(b []byte) (*status.Status, error) {
	var s spb.Status
	if err := proto.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	return status.FromProto(&s), nil
}
