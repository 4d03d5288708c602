package etcd

import (
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/resumable-go/resumable/errclass"
)

// classifier returns the [errclass.Classifier] for the failures of a
// watch and a Store: the markers of package errclass decide first (an
// expired cursor, one of another history, a refused Save); an etcd or gRPC
// error whose code says that retrying cannot help — PermissionDenied,
// Unauthenticated, InvalidArgument — is [errclass.Fail]; anything else is
// left to the default, which retries (no leader, an unreachable member, a
// timeout).
func classifier() errclass.Classifier {
	return errclass.Chain(errclass.Markers(), errclass.Func(classifyCode))
}

func classifyCode(err error) errclass.Decision {
	code := codes.OK
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		code = ee.Code()
	} else if st, ok := status.FromError(err); ok {
		code = st.Code()
	}
	switch code {
	case codes.PermissionDenied, codes.Unauthenticated, codes.InvalidArgument:
		return errclass.Decision{Action: errclass.Fail}
	}
	return errclass.Decision{}
}
