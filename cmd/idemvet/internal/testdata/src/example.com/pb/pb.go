// Package pb stands for a generated gRPC package for idemvet's tests.
package pb

import (
	"context"

	"google.golang.org/grpc"
)

type ChargeRequest struct{ Amount int }

type ChargeReply struct{ ID string }

type PaymentsClient interface {
	Charge(ctx context.Context, in *ChargeRequest, opts ...grpc.CallOption) (*ChargeReply, error)
}

type paymentsClient struct{ cc grpc.ClientConnInterface }

func NewPaymentsClient(cc grpc.ClientConnInterface) PaymentsClient { return &paymentsClient{cc} }

func (c *paymentsClient) Charge(ctx context.Context, in *ChargeRequest, opts ...grpc.CallOption) (*ChargeReply, error) {
	out := new(ChargeReply)
	return out, c.cc.Invoke(ctx, "/pb.Payments/Charge", in, out, opts...)
}

// Quote is not an RPC: a plain type whose name does not end in Client.
type Quote struct{}

func (Quote) Price(ctx context.Context) int { return 1 }
