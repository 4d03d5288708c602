package kubetest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/resumable-go/resumable/internal/testkit/childproc"
	"github.com/resumable-go/resumable/internal/testkit/testbin"
)

// KubernetesVersion is the release of the kube-apiserver that
// scripts/testenv.sh builds.
const KubernetesVersion = testbin.KubernetesVersion

// Environment variables read by the package.
const (
	// EnvIntegration opts in to integration tests when set to "1".
	EnvIntegration = "RESUMABLE_K8S_INTEGRATION"
	// EnvBin names the directory holding the kube-apiserver and etcd binaries.
	EnvBin = testbin.EnvBin
	// EnvCache names the cache root that scripts/testenv.sh builds into
	// (default $HOME/.cache/resumable/testenv); used when EnvBin is unset.
	EnvCache = testbin.EnvCache
)

// Users known to the API server's static token file.
const (
	// AdminUser is the user of [Env.Admin], in group system:masters: it may do
	// anything under every authorization mode.
	AdminUser = "testenv-admin"
	// PlainUser is the user of [Env.User], in no group of its own: under
	// [WithRBAC] it is forbidden everything that is not public (such as /readyz
	// and discovery); under the default AlwaysAllow it may do anything.
	PlainUser = "testenv-user"
)

// Fixed settings of the API server.
const (
	// MinRequestTimeout is the API server's --min-request-timeout (unless
	// [WithAPIServerArgs] overrides it): a watch that asks for no timeout is
	// ended by the server after between one and two times this.
	MinRequestTimeout = 5 * time.Second

	stopGrace       = 30 * time.Second // SIGTERM to SIGKILL when stopping a process
	pollInterval    = 100 * time.Millisecond
	logTailLines    = 60
	defaultDeadline = 2 * time.Minute
)

// Option configures [Start].
type Option interface {
	apply(*config)
}

type config struct {
	rbac          bool
	apiserverArgs []string
	etcdArgs      []string
	startTimeout  time.Duration
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithRBAC runs the API server with --authorization-mode=RBAC instead of the
// default AlwaysAllow: [AdminUser] keeps every right through system:masters,
// and [PlainUser] gets Forbidden.
func WithRBAC() Option {
	return optionFunc(func(c *config) { c.rbac = true })
}

// WithAPIServerArgs appends flags to the API server's command line, after the
// harness's own: for a flag given twice the last one wins (a list flag is
// appended to). Example: WithAPIServerArgs("--etcd-compaction-interval=10s").
func WithAPIServerArgs(args ...string) Option {
	return optionFunc(func(c *config) { c.apiserverArgs = append(c.apiserverArgs, args...) })
}

// WithEtcdArgs appends flags to etcd's command line, after the harness's own.
func WithEtcdArgs(args ...string) Option {
	return optionFunc(func(c *config) { c.etcdArgs = append(c.etcdArgs, args...) })
}

// WithStartTimeout bounds how long a start of etcd or the API server may take
// to become ready (default two minutes). A value <= 0 keeps the default.
func WithStartTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.startTimeout = d
		}
	})
}

// runCommand is the one command that builds the binaries and runs the
// tests against them.
const runCommand = "RESUMABLE_K8S_INTEGRATION=1 RESUMABLE_TESTENV_BIN=$(" + testbin.BuildCommand + ") go test -race -count=1 -p 1 ./internal/testkit/kubetest/ ./adapters/k8s/internal/testenv/ ./adapters/k8s/integration/"

// Env is a running etcd and kube-apiserver for one test. Start creates it; the
// test's cleanup kills both.
type Env struct {
	cfg    config
	binDir string
	dir    string // the test's temporary directory holding everything below

	etcdClientPort, etcdPeerPort, apiPort int

	adminToken, userToken string
	caData                []byte // the API server's self-signed CA, from --cert-dir

	etcd, apiserver *childproc.Proc
}

// Start starts etcd and kube-apiserver on free 127.0.0.1 ports in a temporary
// directory of t, waits until the API server's /readyz answers ok, and
// registers a cleanup that kills both. Without RESUMABLE_K8S_INTEGRATION=1
// it skips t, naming the command that runs these tests apart; without the
// binaries (testbin.Require) it fails t when CI is set and skips it
// otherwise, naming the command that builds them; it fails t when either process
// cannot start or become ready.
func Start(t testing.TB, opts ...Option) *Env {
	t.Helper()
	if os.Getenv(EnvIntegration) != "1" {
		t.Skipf("kubetest: integration test against a real kube-apiserver, run apart: %s", runCommand)
	}
	binDir := testbin.Require(t, "kube-apiserver", "etcd")
	cfg := config{startTimeout: defaultDeadline}
	for _, o := range opts {
		o.apply(&cfg)
	}

	e := &Env{cfg: cfg, binDir: binDir, dir: t.TempDir()}
	for _, d := range []string{"etcd-data", "certs"} {
		if err := os.Mkdir(filepath.Join(e.dir, d), 0o700); err != nil {
			t.Fatalf("kubetest: %v", err)
		}
	}
	if err := e.writeServiceAccountKeys(); err != nil {
		t.Fatalf("kubetest: service account keys: %v", err)
	}
	if err := e.writeTokens(); err != nil {
		t.Fatalf("kubetest: token file: %v", err)
	}
	ports, err := childproc.FreePorts(3)
	if err != nil {
		t.Fatalf("%v", err)
	}
	e.etcdClientPort, e.etcdPeerPort, e.apiPort = ports[0], ports[1], ports[2]

	t.Cleanup(func() { e.cleanup(t) })
	e.StartEtcd(t)
	e.StartAPIServer(t)
	return e
}

// Access is what a client needs to reach the API server as one user: the
// server's URL, the CA that signed its certificate and a bearer token.
// adapters/k8s turns it into a *rest.Config.
type Access struct {
	// Host is the API server's URL, https://127.0.0.1:PORT.
	Host string
	// CAData is the PEM of the CA that verifies the server's certificate.
	CAData []byte
	// BearerToken is the user's token (the static token file's).
	BearerToken string
}

// Admin returns the access of [AdminUser]. Each call returns a fresh copy.
func (e *Env) Admin() Access { return e.access(e.adminToken) }

// User returns the access of [PlainUser]. Each call returns a fresh copy.
func (e *Env) User() Access { return e.access(e.userToken) }

// Host returns the API server's URL, https://127.0.0.1:PORT.
func (e *Env) Host() string { return e.apiURL() }

func (e *Env) access(token string) Access {
	return Access{Host: e.apiURL(), CAData: append([]byte(nil), e.caData...), BearerToken: token}
}

// Dir returns the test's temporary directory holding the data directory, the
// certificates and the logs (apiserver.log, etcd.log).
func (e *Env) Dir() string { return e.dir }

// StartAPIServer starts the API server on its port and waits for /readyz. It
// fails t if the server is already running or does not become ready.
func (e *Env) StartAPIServer(t testing.TB) {
	t.Helper()
	if e.apiserver != nil {
		t.Fatalf("kubetest: StartAPIServer: the API server is already running")
	}
	authz := "AlwaysAllow"
	if e.cfg.rbac {
		authz = "RBAC"
	}
	args := []string{
		"--etcd-servers=" + e.etcdURL(),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		// A loopback address may not be the kubernetes Service's endpoint.
		"--endpoint-reconciler-type=none",
		"--secure-port=" + strconv.Itoa(e.apiPort),
		"--cert-dir=" + filepath.Join(e.dir, "certs"),
		"--token-auth-file=" + filepath.Join(e.dir, "tokens.csv"),
		"--authorization-mode=" + authz,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + filepath.Join(e.dir, "sa.pub"),
		"--service-account-signing-key-file=" + filepath.Join(e.dir, "sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24",
		"--disable-admission-plugins=ServiceAccount",
		"--min-request-timeout=" + strconv.Itoa(int(MinRequestTimeout/time.Second)),
		"--shutdown-delay-duration=0s",
		"--watch-cache=true",
	}
	args = append(args, e.cfg.apiserverArgs...)
	p, err := startProc("kube-apiserver", filepath.Join(e.binDir, "kube-apiserver"), args, e.logPath("apiserver"))
	if err != nil {
		t.Fatalf("%v", err)
	}
	e.apiserver = p
	if err := e.waitReady(p, e.apiURL()+"/readyz", e.adminToken); err != nil {
		t.Fatalf("kubetest: kube-apiserver not ready: %v\n%s", err, e.tails())
	}
	if e.caData == nil {
		// The server wrote its self-signed certificate and CA before it listened,
		// and keeps them across restarts.
		ca, err := os.ReadFile(filepath.Join(e.dir, "certs", "apiserver.crt"))
		if err != nil {
			t.Fatalf("kubetest: read the API server's certificate: %v", err)
		}
		e.caData = ca
	}
}

// StopAPIServer stops the API server gracefully (SIGTERM; SIGKILL after 30 s)
// and returns once it has exited. Open watches end and requests fail until
// [Env.StartAPIServer]. It fails t if the server is not running.
func (e *Env) StopAPIServer(t testing.TB) {
	t.Helper()
	e.stop(t, &e.apiserver, "StopAPIServer", syscall.SIGTERM)
}

// KillAPIServer kills the API server at once (SIGKILL), as a crash would:
// clients see connections reset rather than closed. It fails t if the server
// is not running.
func (e *Env) KillAPIServer(t testing.TB) {
	t.Helper()
	e.stop(t, &e.apiserver, "KillAPIServer", syscall.SIGKILL)
}

// RestartAPIServer stops the API server gracefully and starts it again on the
// same port over the same etcd, waiting for /readyz. Its watch cache starts
// over, so a watch from an older resource version then gets 410 Gone.
func (e *Env) RestartAPIServer(t testing.TB) {
	t.Helper()
	e.StopAPIServer(t)
	e.StartAPIServer(t)
}

// StartEtcd starts etcd on its ports and data directory and waits for its
// /health. It fails t if etcd is already running or does not become healthy.
func (e *Env) StartEtcd(t testing.TB) {
	t.Helper()
	if e.etcd != nil {
		t.Fatalf("kubetest: StartEtcd: etcd is already running")
	}
	peer := "http://127.0.0.1:" + strconv.Itoa(e.etcdPeerPort)
	args := []string{
		"--name=testenv",
		"--data-dir=" + filepath.Join(e.dir, "etcd-data"),
		"--listen-client-urls=" + e.etcdURL(),
		"--advertise-client-urls=" + e.etcdURL(),
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=testenv=" + peer,
		"--unsafe-no-fsync=true",
	}
	args = append(args, e.cfg.etcdArgs...)
	p, err := startProc("etcd", filepath.Join(e.binDir, "etcd"), args, e.logPath("etcd"))
	if err != nil {
		t.Fatalf("%v", err)
	}
	e.etcd = p
	if err := e.waitReady(p, e.etcdURL()+"/health", ""); err != nil {
		t.Fatalf("kubetest: etcd not healthy: %v\n%s", err, e.tails())
	}
}

// StopEtcd stops etcd gracefully (SIGTERM; SIGKILL after 30 s) and returns
// once it has exited. The API server keeps running and fails storage requests
// until [Env.StartEtcd]. It fails t if etcd is not running.
func (e *Env) StopEtcd(t testing.TB) {
	t.Helper()
	e.stop(t, &e.etcd, "StopEtcd", syscall.SIGTERM)
}

// RestartEtcd stops etcd gracefully and starts it again on the same ports and
// data, waiting for its /health. The API server reconnects by itself; it does
// not wait for that.
func (e *Env) RestartEtcd(t testing.TB) {
	t.Helper()
	e.StopEtcd(t)
	e.StartEtcd(t)
}

func (e *Env) stop(t testing.TB, pp **childproc.Proc, op string, sig syscall.Signal) {
	t.Helper()
	p := *pp
	if p == nil {
		t.Fatalf("kubetest: %s: not running", op)
	}
	*pp = nil
	if exited, err := p.Exited(); exited {
		t.Fatalf("kubetest: %s: %s had already exited: %v\n%s", op, p.Name, err, e.tails())
	}
	graceful, err := p.Stop(sig, stopGrace)
	if err != nil {
		t.Fatalf("kubetest: %s: %v", op, err)
	}
	if !graceful && sig != syscall.SIGKILL {
		t.Logf("kubetest: %s: %s ignored SIGTERM for %v and was killed", op, p.Name, stopGrace)
	}
}

// cleanup kills whatever still runs and, if the test failed, logs the tails of
// both logs.
func (e *Env) cleanup(t testing.TB) {
	for _, p := range []*childproc.Proc{e.apiserver, e.etcd} {
		if p != nil {
			if _, err := p.Stop(syscall.SIGKILL, stopGrace); err != nil {
				t.Errorf("kubetest: cleanup: %v", err)
			}
		}
	}
	e.apiserver, e.etcd = nil, nil
	if t.Failed() {
		t.Logf("kubetest: logs in %s (removed with the test's temporary directory)\n%s", e.dir, e.tails())
	}
}

// waitReady polls url until it answers 200, p exits, or the start timeout
// passes. It sends token, if any, as a bearer token.
func (e *Env) waitReady(p *childproc.Proc, url, token string) error {
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.startTimeout)
	defer cancel()
	// The API server's CA can be read only once it is up, so the probe trusts
	// any certificate; it goes only to 127.0.0.1. No keep-alives: nothing
	// lingers after the probe.
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback readiness probe
		DisableKeepAlives: true,
	}}
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	var last error
	for {
		if exited, err := p.Exited(); exited {
			return fmt.Errorf("%s exited: %v", p.Name, err)
		}
		last = probe(ctx, client, url, token)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: no ready answer from %s within %v: last: %v", p.Name, url, e.cfg.startTimeout, last)
		case <-p.Done():
		case <-ticker.C:
		}
	}
}

// probe makes one GET of url and returns nil if it answered 200.
func probe(ctx context.Context, client *http.Client, url, token string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, body)
	}
	return nil
}

func (e *Env) apiURL() string  { return "https://127.0.0.1:" + strconv.Itoa(e.apiPort) }
func (e *Env) etcdURL() string { return "http://127.0.0.1:" + strconv.Itoa(e.etcdClientPort) }

func (e *Env) logPath(name string) string { return filepath.Join(e.dir, name+".log") }

func (e *Env) tails() string {
	return fmt.Sprintf("---- tail of %s\n%s\n---- tail of %s\n%s",
		e.logPath("etcd"), childproc.Tail(e.logPath("etcd"), logTailLines),
		e.logPath("apiserver"), childproc.Tail(e.logPath("apiserver"), logTailLines))
}

// writeServiceAccountKeys writes the key pair the API server signs and checks
// service account tokens with.
func (e *Env) writeServiceAccountKeys() error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	priv := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(filepath.Join(e.dir, "sa.key"), priv, 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(e.dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
}

// writeTokens writes the static token file: token,user,uid,"groups".
func (e *Env) writeTokens() error {
	var err error
	if e.adminToken, err = randomToken(); err != nil {
		return err
	}
	if e.userToken, err = randomToken(); err != nil {
		return err
	}
	content := fmt.Sprintf("%s,%s,%s,\"system:masters\"\n%s,%s,%s\n",
		e.adminToken, AdminUser, AdminUser, e.userToken, PlainUser, PlainUser)
	return os.WriteFile(filepath.Join(e.dir, "tokens.csv"), []byte(content), 0o600)
}

func randomToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// startProc starts bin with args in its own process group, appending its
// stdout and stderr to logPath after a header line naming the run.
func startProc(name, bin string, args []string, logPath string) (*childproc.Proc, error) {
	header := fmt.Sprintf("==== kubetest: %s start %s\n==== %s %s\n", name, time.Now().Format(time.RFC3339Nano), bin, strings.Join(args, " "))
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("kubetest: open %s log: %w", name, err)
	}
	_, err = f.WriteString(header)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("kubetest: write %s log: %w", name, err)
	}
	return childproc.Start(name, bin, args, logPath, logPath)
}
