// Package metadata is a stub of google.golang.org/grpc/metadata.
package metadata

import "context"

type MD map[string][]string

func Pairs(kv ...string) MD                                                     { return MD{} }
func NewOutgoingContext(ctx context.Context, md MD) context.Context             { return ctx }
func AppendToOutgoingContext(ctx context.Context, kv ...string) context.Context { return ctx }
func (md MD) Set(k string, vals ...string)                                      {}
func (md MD) Get(k string) []string                                             { return nil }
func FromIncomingContext(ctx context.Context) (MD, bool)                        { return nil, false }
