package idemgrpc_test

import (
	"context"
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemgrpc"
	"github.com/idemkit/idem/memstore"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Config errors name the field they reject.
func TestConfigValidation(t *testing.T) {
	t.Parallel()
	guard, _ := idem.New(memstore.New(), nil)
	for _, tc := range []struct {
		name string
		cfg  *idemgrpc.Config
		want string
	}{
		{"Nil", nil, "Config.Methods"},
		{"NoMethods", &idemgrpc.Config{}, "Config.Methods"},
		{"NotAFullName", &idemgrpc.Config{Methods: map[string]idemgrpc.MethodOptions{"Transfer": {}}}, "Config.Methods"},
		{"NegativeTTL", &idemgrpc.Config{Methods: map[string]idemgrpc.MethodOptions{"/s.S/M": {TTL: -1}}}, "TTL"},
		{"NegativeSize", &idemgrpc.Config{Methods: map[string]idemgrpc.MethodOptions{"/s.S/M": {}}, MaxResponseSize: -1}, "Config.MaxResponseSize"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := idemgrpc.New(guard, tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming %s", err, tc.want)
			}
		})
	}
	if _, err := idemgrpc.New(nil, &idemgrpc.Config{Methods: map[string]idemgrpc.MethodOptions{"/s.S/M": {}}}); err == nil {
		t.Fatal("a nil guard was accepted")
	}
}

// The default Final: business errors are recorded, transient ones roll
// back.
func TestDefaultFinal(t *testing.T) {
	t.Parallel()
	for code, want := range map[uint32]bool{0: true, 1: false, 2: false, 3: true, 4: false, 5: true, 6: true, 7: true,
		8: false, 9: true, 10: false, 11: true, 12: true, 13: false, 14: false, 15: false, 16: true} {
		if got := idemgrpc.DefaultFinal(codeOf(code)); got != want {
			t.Errorf("DefaultFinal(%v) = %v, want %v", codeOf(code), got, want)
		}
	}
}

// The answer of a method whose response type is not in the global
// registries is replayed as the recorded bytes, unchanged.
func TestReplayOfAnUnregisteredTypeKeepsItsBytes(t *testing.T) {
	t.Parallel()
	guard, _ := idem.New(memstore.New(), nil)
	i, err := idemgrpc.New(guard, &idemgrpc.Config{Methods: map[string]idemgrpc.MethodOptions{"/not.Registered/M": {}}, Anonymous: true, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	info := &grpc.UnaryServerInfo{FullMethod: "/not.Registered/M"}
	ctx := incoming(idemgrpc.MetadataKey, "k1")
	handler := func(context.Context, any) (any, error) { return wrapperspb.String("the answer"), nil }
	first, err := i.Unary(ctx, wrapperspb.Int64(1), info, handler)
	if err != nil {
		t.Fatal(err)
	}
	again, err := i.Unary(ctx, wrapperspb.Int64(1), info, func(context.Context, any) (any, error) {
		t.Fatal("the handler ran again")
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := proto.Marshal(first.(proto.Message))
	got, _ := proto.Marshal(again.(proto.Message))
	if string(got) != string(want) {
		t.Fatalf("replayed bytes %x, want %x", got, want)
	}
	var decoded wrapperspb.StringValue
	if err := proto.Unmarshal(got, &decoded); err != nil || decoded.Value != "the answer" {
		t.Fatalf("client decodes %v, %v", decoded.Value, err)
	}
}
