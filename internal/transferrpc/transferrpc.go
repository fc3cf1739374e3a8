// Package transferrpc is the transfers service's transfer as a gRPC
// method, for the tests and examples of package idemgrpc. Its messages are
// described in code (descriptorpb) and built with dynamicpb, so that no
// protoc step is needed; the file is registered in the global registries
// under the name "idem/transfers/v1/transfers.proto":
//
//	package idem.transfers.v1;
//	message TransferRequest { string from = 1; string to = 2; int64 amount = 3; }
//	message Transfer { int64 id = 1; string from = 2; string to = 3; int64 amount = 4; string created_at = 5; }
//	service Transfers { rpc Transfer(TransferRequest) returns (Transfer); }
//
// A transfer runs through transfers.Service.ApplyTransfer, in the
// idempotency transaction the idemgrpc interceptor opened. A refusal is a
// final business error (recorded and replayed): an unknown account is
// NotFound, insufficient funds FailedPrecondition, any other refusal
// InvalidArgument; each carries an ErrorInfo whose reason is the refusal's
// kind. A database failure is Unavailable (rolled back).
package transferrpc

import (
	"context"
	"strings"

	"github.com/idemkit/idem/internal/transfers"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// Names of the service and its method.
const (
	ServiceName    = "idem.transfers.v1.Transfers"
	TransferMethod = "/" + ServiceName + "/Transfer"
)

var (
	requestDesc  protoreflect.MessageDescriptor
	transferDesc protoreflect.MessageDescriptor
)

func init() {
	field := func(name string, n int32, typ descriptorpb.FieldDescriptorProto_Type) *descriptorpb.FieldDescriptorProto {
		return &descriptorpb.FieldDescriptorProto{
			Name:     proto.String(name),
			JsonName: proto.String(name),
			Number:   proto.Int32(n),
			Label:    descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
			Type:     typ.Enum(),
		}
	}
	str, i64 := descriptorpb.FieldDescriptorProto_TYPE_STRING, descriptorpb.FieldDescriptorProto_TYPE_INT64
	fd := &descriptorpb.FileDescriptorProto{
		Name:    proto.String("idem/transfers/v1/transfers.proto"),
		Package: proto.String("idem.transfers.v1"),
		Syntax:  proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{
			{Name: proto.String("TransferRequest"), Field: []*descriptorpb.FieldDescriptorProto{
				field("from", 1, str), field("to", 2, str), field("amount", 3, i64),
			}},
			{Name: proto.String("Transfer"), Field: []*descriptorpb.FieldDescriptorProto{
				field("id", 1, i64), field("from", 2, str), field("to", 3, str), field("amount", 4, i64), field("created_at", 5, str),
			}},
		},
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name: proto.String("Transfers"),
			Method: []*descriptorpb.MethodDescriptorProto{{
				Name:       proto.String("Transfer"),
				InputType:  proto.String(".idem.transfers.v1.TransferRequest"),
				OutputType: proto.String(".idem.transfers.v1.Transfer"),
			}},
		}},
	}
	file, err := protodesc.NewFile(fd, protoregistry.GlobalFiles)
	if err != nil {
		panic("transferrpc: " + err.Error())
	}
	if err := protoregistry.GlobalFiles.RegisterFile(file); err != nil {
		panic("transferrpc: " + err.Error())
	}
	requestDesc = file.Messages().ByName("TransferRequest")
	transferDesc = file.Messages().ByName("Transfer")
	for _, md := range []protoreflect.MessageDescriptor{requestDesc, transferDesc} {
		if err := protoregistry.GlobalTypes.RegisterMessage(dynamicpb.NewMessageType(md)); err != nil {
			panic("transferrpc: " + err.Error())
		}
	}
}

// Request returns a TransferRequest.
func Request(from, to string, amount int64) *dynamicpb.Message {
	m := dynamicpb.NewMessage(requestDesc)
	set(m, "from", protoreflect.ValueOfString(from))
	set(m, "to", protoreflect.ValueOfString(to))
	set(m, "amount", protoreflect.ValueOfInt64(amount))
	return m
}

// NewTransfer returns an empty Transfer, for a client to decode into.
func NewTransfer() *dynamicpb.Message { return dynamicpb.NewMessage(transferDesc) }

// Get returns the named field of m as a Go value (string or int64).
func Get(m proto.Message, name string) any {
	r := m.ProtoReflect()
	return r.Get(r.Descriptor().Fields().ByName(protoreflect.Name(name))).Interface()
}

func set(m *dynamicpb.Message, name string, v protoreflect.Value) {
	m.Set(m.Descriptor().Fields().ByName(protoreflect.Name(name)), v)
}

// Server serves the Transfers service over a transfers.Service.
type Server struct {
	Service *transfers.Service
	// Before, if set, runs at the start of each call, before the
	// transfer; an error it returns is the call's answer (tests inject
	// faults with it).
	Before func(ctx context.Context) error
	// After, if set, runs after the transfer was applied in the call's
	// transaction, before the answer; an error it returns replaces the
	// answer (tests make a call fail after its effect with it).
	After func(ctx context.Context) error
}

// Transfer applies the transfer the request names.
func (s *Server) Transfer(ctx context.Context, req proto.Message) (proto.Message, error) {
	if s.Before != nil {
		if err := s.Before(ctx); err != nil {
			return nil, err
		}
	}
	from, _ := Get(req, "from").(string)
	to, _ := Get(req, "to").(string)
	amount, _ := Get(req, "amount").(int64)
	t, no, err := s.Service.ApplyTransfer(ctx, from, to, amount)
	switch {
	case err != nil:
		return nil, status.Error(codes.Unavailable, "the transfer was not applied; retry it with the same key")
	case no != nil:
		return nil, declined(no)
	}
	if s.After != nil {
		if err := s.After(ctx); err != nil {
			return nil, err
		}
	}
	out := NewTransfer()
	set(out, "id", protoreflect.ValueOfInt64(t.ID))
	set(out, "from", protoreflect.ValueOfString(t.From))
	set(out, "to", protoreflect.ValueOfString(t.To))
	set(out, "amount", protoreflect.ValueOfInt64(t.Amount))
	set(out, "created_at", protoreflect.ValueOfString(t.CreatedAt))
	return out, nil
}

func declined(no *transfers.Declined) error {
	code := codes.InvalidArgument
	switch no.Kind {
	case "unknown-account":
		code = codes.NotFound
	case "insufficient-funds":
		code = codes.FailedPrecondition
	}
	st, err := status.New(code, no.Detail).WithDetails(&errdetails.ErrorInfo{
		Reason: strings.ToUpper(strings.ReplaceAll(no.Kind, "-", "_")),
		Domain: "transfers.idemkit.dev",
	})
	if err != nil {
		return status.Error(code, no.Detail)
	}
	return st.Err()
}

// ServiceDesc describes the Transfers service for grpc.Server.RegisterService;
// its implementation is a *Server.
var ServiceDesc = grpc.ServiceDesc{
	ServiceName: ServiceName,
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Transfer",
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := dynamicpb.NewMessage(requestDesc)
			if err := dec(in); err != nil {
				return nil, err
			}
			s := srv.(*Server)
			if interceptor == nil {
				return s.Transfer(ctx, in)
			}
			info := &grpc.UnaryServerInfo{Server: srv, FullMethod: TransferMethod}
			return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
				return s.Transfer(ctx, req.(proto.Message))
			})
		},
	}},
	Metadata: "idem/transfers/v1/transfers.proto",
}

// Transfer calls the method on conn and decodes the answer.
func Transfer(ctx context.Context, conn grpc.ClientConnInterface, req proto.Message, opts ...grpc.CallOption) (*dynamicpb.Message, error) {
	out := NewTransfer()
	if err := conn.Invoke(ctx, TransferMethod, req, out, opts...); err != nil {
		return nil, err
	}
	return out, nil
}
