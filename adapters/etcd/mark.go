package etcd

import (
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/resumable-go/resumable/errclass"
)

// refused marks, where an etcd request failed, what no retry can change:
// PermissionDenied, Unauthenticated and InvalidArgument are
// [errclass.Permanent]; any other error, and one marked already, is
// returned as it is, for the stream to retry.
func refused(err error) error {
	if err == nil || errclass.Markers().Classify(err).Action != errclass.Unknown {
		return err
	}
	code := codes.OK
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		code = ee.Code()
	} else if st, ok := status.FromError(err); ok {
		code = st.Code()
	}
	switch code {
	case codes.PermissionDenied, codes.Unauthenticated, codes.InvalidArgument:
		return errclass.Permanent(err)
	}
	return err
}
