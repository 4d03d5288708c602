// Package integration_test runs the k8s adapter's RetryWatcher against a real
// etcd and kube-apiserver (package internal/testenv), side by side with
// client-go's watchtools.RetryWatcher where the two should behave alike.
//
// The tests are opt-in: without RESUMABLE_K8S_INTEGRATION=1 and the binaries
// of scripts/testenv.sh build, each one skips with a one-line reason. Run
// them with
//
//	RESUMABLE_K8S_INTEGRATION=1 RESUMABLE_TESTENV_BIN=$(bash scripts/testenv.sh build) \
//		go test -race -count=1 -v ./adapters/k8s/integration/
package integration_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
