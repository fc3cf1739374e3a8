package idemgrpc

import (
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/emptypb"
)

// decodeResponse turns a recorded response back into a message for the
// server to send. The response type is found from the method's descriptor
// in the global registries (generated code registers there, and so can
// dynamicpb types); a method whose types are not registered gets an
// emptypb.Empty whose unknown fields are the recorded bytes, which the
// proto codec sends unchanged and the client decodes into its own type.
func (i *Interceptor) decodeResponse(fullMethod string, b []byte) (proto.Message, error) {
	var newMsg func() proto.Message
	if v, ok := i.responses.Load(fullMethod); ok {
		newMsg = v.(func() proto.Message)
	} else {
		newMsg = responseType(fullMethod)
		i.responses.Store(fullMethod, newMsg)
	}
	m := newMsg()
	if err := (proto.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(b, m); err != nil {
		return nil, err
	}
	return m, nil
}

// responseType returns a constructor of the method's response message.
func responseType(fullMethod string) func() proto.Message {
	raw := func() proto.Message { return &emptypb.Empty{} }
	svc, name, ok := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	if !ok {
		return raw
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return raw
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return raw
	}
	md := sd.Methods().ByName(protoreflect.Name(name))
	if md == nil {
		return raw
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
	if err != nil {
		return raw
	}
	return func() proto.Message { return mt.New().Interface() }
}
