// Package testenv gives the k8s adapter's integration tests a real etcd and
// kube-apiserver with client-go configurations: it is the few lines that
// turn the harness of internal/testkit/kubetest (which starts, stops and
// restarts the processes and returns plain data, importing nothing of
// k8s.io) into *rest.Config values.
//
// The rules of use are kubetest's: tests opt in with
// RESUMABLE_K8S_INTEGRATION=1; without the binaries [Start] skips naming
// bash scripts/testenv.sh build, or fails when CI is set (CI never skips).
// [Env] has every method of kubetest.Env (RestartAPIServer, KillAPIServer,
// RestartEtcd, …) and adds [Env.Config] and [Env.UserConfig].
//
// The nested module build/ pins the versions scripts/testenv.sh builds
// kube-apiserver and etcd from.
package testenv
