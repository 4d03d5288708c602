package etcd

import (
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/resumable-go/resumable/errclass"
)

// classifier: the errclass markers first; then PermissionDenied,
// Unauthenticated and InvalidArgument fail; the default retries the rest.
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
