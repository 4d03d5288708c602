package etcd_test

import (
	"context"
	"errors"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/resumable-go/resumable/adapters/etcd"
	"github.com/resumable-go/resumable/errclass"
)

// failingKV fails every request with err.
type failingKV struct {
	scripted    // a Watcher too, so that a Source checks the cluster through it
	clientv3.KV // nil: only Get and Txn are called
	err         error
}

func (k *failingKV) Get(context.Context, string, ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	return nil, k.err
}

func (k *failingKV) Txn(context.Context) clientv3.Txn { return failingTxn{k.err} }

type failingTxn struct{ err error }

func (t failingTxn) If(...clientv3.Cmp) clientv3.Txn        { return t }
func (t failingTxn) Then(...clientv3.Op) clientv3.Txn       { return t }
func (t failingTxn) Else(...clientv3.Op) clientv3.Txn       { return t }
func (t failingTxn) Commit() (*clientv3.TxnResponse, error) { return nil, t.err }

// TestErrorsMarkedWhereTheyArise: an etcd request that no retry can fix
// (PermissionDenied, Unauthenticated, InvalidArgument) is marked permanent
// by the Source, the resync and the Store where it fails, so that
// errclass.Default, with no classifier of this package, stops the stream;
// any other failure is left to be retried.
func TestErrorsMarkedWhereTheyArise(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want errclass.Action
	}{
		{name: "permission denied", err: rpctypes.ErrPermissionDenied, want: errclass.Fail},
		{name: "auth failed", err: rpctypes.ErrAuthFailed, want: errclass.Fail},
		{name: "grpc unauthenticated", err: status.Error(codes.Unauthenticated, "no token"), want: errclass.Fail},
		{name: "grpc invalid argument", err: status.Error(codes.InvalidArgument, "bad"), want: errclass.Fail},
		{name: "no leader", err: rpctypes.ErrNoLeader, want: errclass.Retry},
		{name: "unavailable", err: status.Error(codes.Unavailable, "down"), want: errclass.Retry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kv := &failingKV{err: tt.err}
			ctx := ctxFor(t)
			_, openErr := newSource(t, kv, "p").Open(ctx, etcd.Cursor{Revision: 1})
			_, resyncErr := etcd.Resync(kv, "p", 0)(ctx, nil, func(etcd.Event) error { return nil })
			store, err := etcd.NewStore(kv, "k", etcd.CursorCodec(), etcd.Cursor{})
			if err != nil {
				t.Fatalf("NewStore() = %v", err)
			}
			_, loadErr := store.Load(ctx)
			saveErr := store.Save(ctx, etcd.Cursor{Revision: 2})
			for _, got := range []struct {
				where string
				err   error
			}{{"Open", openErr}, {"resync", resyncErr}, {"Load", loadErr}, {"Save", saveErr}} {
				if !errors.Is(got.err, tt.err) {
					t.Errorf("%s = %v, want an error matching %v", got.where, got.err, tt.err)
				}
				if d := errclass.Default().Classify(got.err); d.Action != tt.want {
					t.Errorf("Default().Classify(%s error %v) = %v, want %v", got.where, got.err, d, tt.want)
				}
			}
		})
	}
}
