// Package kubetest runs a real etcd and kube-apiserver on loopback ports for
// the integration tests of the k8s adapter, and gives the test what a client
// needs as plain data ([Access]: the server's URL, its CA and a bearer
// token); it imports nothing of k8s.io, so that no module requiring
// internal/testkit has Kubernetes in its module graph. adapters/k8s turns
// an [Access] into a *rest.Config (adapters/k8s/internal/testenv).
//
// A real API server does what fakes do not: it ends every watch on its own
// after a few seconds (--min-request-timeout is 5 here), sends bookmarks, and
// after a restart answers 410 Gone ("too old resource version") to a watch
// from a resource version older than its fresh watch cache. [Start] gives a
// test such a server, and [Env] stops and restarts it (and etcd) on the same
// ports and data directory.
//
// Rules of use:
//   - Tests opt in with RESUMABLE_K8S_INTEGRATION=1 ([EnvIntegration]), so
//     that they run apart from the unit tests (one package at a time, as
//     .ci/run does); without it [Start] skips, naming the command.
//   - The rule of every test server of internal/testkit: CI never skips.
//     Without the binaries, [Start] fails the test when CI is set and skips
//     it otherwise, naming the one command that builds them
//     (testbin.BuildCommand, bash scripts/testenv.sh build).
//   - The binaries are those scripts/testenv.sh builds from the Go module
//     proxy, found by package testbin ($RESUMABLE_TESTENV_BIN overrides where).
//   - Every process started is killed, with its process group, when the test
//     ends (t.Cleanup), failed or not; on Linux a child is also killed if the
//     test binary dies. Logs go to files in the test's temporary directory and
//     their tails are printed when the test has failed.
//   - An Env belongs to the test that started it: call its methods from that
//     test's goroutine. [Env.Admin], [Env.User] and [Env.Host] may be called
//     from any goroutine.
//   - Costs, measured on two busy cores: [Start] about 3 s; [Env.RestartAPIServer]
//     3–4 s; [Env.RestartEtcd] about 7 s, most of it etcd's graceful stop
//     waiting on the API server's watch streams. Share one Env across subtests
//     when they can share a cluster.
package kubetest
