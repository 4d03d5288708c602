package testenv

import (
	"testing"

	"k8s.io/client-go/rest"

	"github.com/resumable-go/resumable/internal/testkit/kubetest"
)

// Env is a running etcd and kube-apiserver for one test (a kubetest.Env),
// with client-go configurations for its users.
type Env struct {
	*kubetest.Env
}

// Option configures [Start]: one of kubetest's options.
type Option = kubetest.Option

// WithRBAC runs the API server under RBAC (kubetest.WithRBAC): the admin
// of [Env.Config] may do anything, the user of [Env.UserConfig] is
// forbidden.
func WithRBAC() Option { return kubetest.WithRBAC() }

// Start starts etcd and kube-apiserver for t as kubetest.Start does (it
// skips or fails t by the same rules) and returns them.
func Start(t testing.TB, opts ...Option) *Env {
	t.Helper()
	return &Env{kubetest.Start(t, opts...)}
}

// Config returns a new client configuration for kubetest.AdminUser.
func (e *Env) Config() *rest.Config { return RESTConfig(e.Admin()) }

// UserConfig returns a new client configuration for kubetest.PlainUser.
func (e *Env) UserConfig() *rest.Config { return RESTConfig(e.User()) }

// RESTConfig returns a client configuration for a: bearer token, TLS
// verified with a's CA, and QPS 50 and Burst 100, so that tests are not
// slowed by client-go's default rate limit.
func RESTConfig(a kubetest.Access) *rest.Config {
	return &rest.Config{
		Host:            a.Host,
		BearerToken:     a.BearerToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: a.CAData},
		QPS:             50,
		Burst:           100,
	}
}
