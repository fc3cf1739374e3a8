package idemgrpc_test

import (
	"context"
	"database/sql"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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

	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/sqlitestore"
)

// The tests' gRPC service: one method whose effect is one row of one table,
// written through the transaction the interceptor opened, so that the tests
// see exactly how many times it ran. Its messages are described in code and
// built with dynamicpb (no protoc step):
//
//	package idem.test.v1;
//	message TransferRequest { string from = 1; string to = 2; int64 amount = 3; }
//	message Transfer { int64 id = 1; string from = 2; string to = 3; int64 amount = 4; string created_at = 5; }
//	service Ledger { rpc Transfer(TransferRequest) returns (Transfer); }
//
// A balance is an opening balance (held by the test) plus what the table
// says came in, minus what went out. A transfer over the balance is a
// final business error, FailedPrecondition with an ErrorInfo (recorded and
// replayed); a database failure is Unavailable (rolled back).
const (
	ledgerService  = "idem.test.v1.Ledger"
	transferMethod = "/" + ledgerService + "/Transfer"
)

var requestDesc, transferDesc protoreflect.MessageDescriptor

func init() {
	field := func(name string, n int32, typ descriptorpb.FieldDescriptorProto_Type) *descriptorpb.FieldDescriptorProto {
		return &descriptorpb.FieldDescriptorProto{
			Name: proto.String(name), JsonName: proto.String(name), Number: proto.Int32(n),
			Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), Type: typ.Enum(),
		}
	}
	str, i64 := descriptorpb.FieldDescriptorProto_TYPE_STRING, descriptorpb.FieldDescriptorProto_TYPE_INT64
	fd := &descriptorpb.FileDescriptorProto{
		Name:    proto.String("idem/test/v1/ledger.proto"),
		Package: proto.String("idem.test.v1"),
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
			Name: proto.String("Ledger"),
			Method: []*descriptorpb.MethodDescriptorProto{{
				Name:       proto.String("Transfer"),
				InputType:  proto.String(".idem.test.v1.TransferRequest"),
				OutputType: proto.String(".idem.test.v1.Transfer"),
			}},
		}},
	}
	file, err := protodesc.NewFile(fd, protoregistry.GlobalFiles)
	if err != nil {
		panic(err)
	}
	if err := protoregistry.GlobalFiles.RegisterFile(file); err != nil {
		panic(err)
	}
	requestDesc = file.Messages().ByName("TransferRequest")
	transferDesc = file.Messages().ByName("Transfer")
	for _, md := range []protoreflect.MessageDescriptor{requestDesc, transferDesc} {
		if err := protoregistry.GlobalTypes.RegisterMessage(dynamicpb.NewMessageType(md)); err != nil {
			panic(err)
		}
	}
}

// transferRequest returns a TransferRequest.
func transferRequest(from, to string, amount int64) *dynamicpb.Message {
	m := dynamicpb.NewMessage(requestDesc)
	setField(m, "from", protoreflect.ValueOfString(from))
	setField(m, "to", protoreflect.ValueOfString(to))
	setField(m, "amount", protoreflect.ValueOfInt64(amount))
	return m
}

// field returns the named field of m as a Go value (string or int64).
func field(m proto.Message, name string) any {
	r := m.ProtoReflect()
	return r.Get(r.Descriptor().Fields().ByName(protoreflect.Name(name))).Interface()
}

func setField(m *dynamicpb.Message, name string, v protoreflect.Value) {
	m.Set(m.Descriptor().Fields().ByName(protoreflect.Name(name)), v)
}

// invokeTransfer calls the method on conn and decodes the answer.
func invokeTransfer(ctx context.Context, conn grpc.ClientConnInterface, req proto.Message, opts ...grpc.CallOption) (*dynamicpb.Message, error) {
	out := dynamicpb.NewMessage(transferDesc)
	if err := conn.Invoke(ctx, transferMethod, req, out, opts...); err != nil {
		return nil, err
	}
	return out, nil
}

// The effect table: one row per transfer.
const (
	sqliteTable = `CREATE TABLE ledger_transfers (id INTEGER PRIMARY KEY,
		from_account TEXT NOT NULL, to_account TEXT NOT NULL, amount BIGINT NOT NULL, created_at TEXT NOT NULL)`
	postgresTable = `CREATE TABLE ledger_transfers (id BIGSERIAL PRIMARY KEY,
		from_account TEXT NOT NULL, to_account TEXT NOT NULL, amount BIGINT NOT NULL, created_at TEXT NOT NULL)`
)

// querier is the one thing the ledger needs of a transaction or a pool.
type querier interface {
	// row runs a query that returns one row and scans it into dest.
	row(ctx context.Context, q string, args []any, dest ...any) error
	exec(ctx context.Context, q string, args []any) error
}

type sqlQ struct {
	q interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
		ExecContext(context.Context, string, ...any) (sql.Result, error)
	}
}

func (s sqlQ) row(ctx context.Context, q string, args []any, dest ...any) error {
	return s.q.QueryRowContext(ctx, q, args...).Scan(dest...)
}

func (s sqlQ) exec(ctx context.Context, q string, args []any) error {
	_, err := s.q.ExecContext(ctx, q, args...)
	return err
}

type pgQ struct {
	q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
		Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	}
}

func (p pgQ) row(ctx context.Context, q string, args []any, dest ...any) error {
	return p.q.QueryRow(ctx, q, args...).Scan(dest...)
}

func (p pgQ) exec(ctx context.Context, q string, args []any) error {
	_, err := p.q.Exec(ctx, q, args...)
	return err
}

// ledger is the service behind the method.
type ledger struct {
	db querier                                   // outside any call: set-up and reads
	tx func(ctx context.Context) (querier, bool) // the call's transaction

	mu      sync.Mutex
	opening map[string]int64

	// Before, if set, runs at the start of each call, before the
	// transfer; an error it returns is the call's answer.
	Before func(ctx context.Context) error
	// After, if set, runs after the transfer was written in the call's
	// transaction, before the answer; an error it returns replaces the
	// answer.
	After func(ctx context.Context) error
}

func sqliteLedger(t *testing.T, s *sqlitestore.Store) *ledger {
	l := &ledger{
		db: sqlQ{s.DB()},
		tx: func(ctx context.Context) (querier, bool) {
			tx, ok := sqlitestore.TxFrom(ctx)
			return sqlQ{tx}, ok
		},
	}
	l.create(t, sqliteTable)
	return l
}

func pgLedger(t *testing.T, s *pgstore.Store) *ledger {
	l := &ledger{
		db: pgQ{s.Pool()},
		tx: func(ctx context.Context) (querier, bool) {
			tx, ok := pgstore.TxFrom(ctx)
			return pgQ{tx}, ok
		},
	}
	l.create(t, postgresTable)
	return l
}

func (l *ledger) create(t *testing.T, table string) {
	t.Helper()
	l.opening = map[string]int64{}
	if err := l.db.exec(context.Background(), table, nil); err != nil {
		t.Fatal(err)
	}
}

// balance is the account's opening balance plus what came in, minus what
// went out.
func (l *ledger) balance(ctx context.Context, q querier, id string) (int64, error) {
	var in, out int64
	err := q.row(ctx, `SELECT
		coalesce(sum(CASE WHEN to_account = $1 THEN amount END), 0),
		coalesce(sum(CASE WHEN from_account = $1 THEN amount END), 0)
		FROM ledger_transfers`, []any{id}, &in, &out)
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.opening[id] + in - out, err
}

// setOpening sets the account's balance to b, whatever the table says.
func (l *ledger) setOpening(ctx context.Context, id string, b int64) error {
	now, err := l.balance(ctx, l.db, id)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.opening[id] += b - now
	return err
}

func (l *ledger) count(ctx context.Context) (int64, error) {
	var n int64
	err := l.db.row(ctx, `SELECT count(*) FROM ledger_transfers`, nil, &n)
	return n, err
}

// Transfer writes the transfer the request names.
func (l *ledger) Transfer(ctx context.Context, req proto.Message) (proto.Message, error) {
	if l.Before != nil {
		if err := l.Before(ctx); err != nil {
			return nil, err
		}
	}
	q, ok := l.tx(ctx)
	if !ok {
		return nil, status.Error(codes.Internal, "no idempotency transaction in the call's context")
	}
	from, _ := field(req, "from").(string)
	to, _ := field(req, "to").(string)
	amount, _ := field(req, "amount").(int64)
	have, err := l.balance(ctx, q, from)
	if err != nil {
		return nil, status.Error(codes.Unavailable, "the transfer was not applied; retry it with the same key")
	}
	if amount > have {
		st, _ := status.New(codes.FailedPrecondition, "insufficient funds").WithDetails(&errdetails.ErrorInfo{
			Reason: "INSUFFICIENT_FUNDS", Domain: "test.idemkit.dev",
		})
		return nil, st.Err()
	}
	var id int64
	created := time.Now().UTC().Format(time.RFC3339Nano)
	if err := q.row(ctx, `INSERT INTO ledger_transfers (from_account, to_account, amount, created_at) VALUES ($1, $2, $3, $4) RETURNING id`,
		[]any{from, to, amount, created}, &id); err != nil {
		return nil, status.Error(codes.Unavailable, "the transfer was not applied; retry it with the same key")
	}
	if l.After != nil {
		if err := l.After(ctx); err != nil {
			return nil, err
		}
	}
	out := dynamicpb.NewMessage(transferDesc)
	setField(out, "id", protoreflect.ValueOfInt64(id))
	setField(out, "from", protoreflect.ValueOfString(from))
	setField(out, "to", protoreflect.ValueOfString(to))
	setField(out, "amount", protoreflect.ValueOfInt64(amount))
	setField(out, "created_at", protoreflect.ValueOfString(created))
	return out, nil
}

// ledgerDesc describes the service for grpc.Server.RegisterService; its
// implementation is a *ledger.
var ledgerDesc = grpc.ServiceDesc{
	ServiceName: ledgerService,
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Transfer",
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := dynamicpb.NewMessage(requestDesc)
			if err := dec(in); err != nil {
				return nil, err
			}
			l := srv.(*ledger)
			if interceptor == nil {
				return l.Transfer(ctx, in)
			}
			info := &grpc.UnaryServerInfo{Server: srv, FullMethod: transferMethod}
			return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
				return l.Transfer(ctx, req.(proto.Message))
			})
		},
	}},
	Metadata: "idem/test/v1/ledger.proto",
}
