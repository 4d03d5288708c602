package testbin_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/resumable-go/resumable/internal/testkit/childproc"
	"github.com/resumable-go/resumable/internal/testkit/testbin"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestDir: $RESUMABLE_TESTENV_BIN wins; else the directory is named after
// the Kubernetes release under the cache root.
func TestDir(t *testing.T) {
	t.Setenv(testbin.EnvBin, "")
	t.Setenv(testbin.EnvCache, "/cache")
	if got, want := testbin.Dir(), filepath.Join("/cache", "k8s-"+testbin.KubernetesVersion); got != want {
		t.Errorf("Dir() with %s = %q, want %q", testbin.EnvCache, got, want)
	}
	t.Setenv(testbin.EnvBin, "/bin/here")
	if got := testbin.Dir(); got != "/bin/here" {
		t.Errorf("Dir() with %s = %q, want /bin/here", testbin.EnvBin, got)
	}
}

// TestVersionIsTheBuilt: the directory the harnesses look in is the one
// scripts/testenv.sh builds into, named after the k8s.io/kubernetes
// requirement of its build module.
func TestVersionIsTheBuilt(t *testing.T) {
	const mod = "../../../adapters/k8s/internal/testenv/build/go.mod"
	b, err := os.ReadFile(mod)
	if err != nil {
		t.Fatalf("read %s: %v", mod, err)
	}
	var built string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "k8s.io/kubernetes" {
			built = f[1]
			break
		}
	}
	if built != testbin.KubernetesVersion {
		t.Errorf("KubernetesVersion = %q, want %q (the k8s.io/kubernetes requirement of %s)", testbin.KubernetesVersion, built, mod)
	}
}

// TestFind: a binary is found only as an executable file; the reason for
// one missing names it and the build command.
func TestFind(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(testbin.EnvBin, dir)
	write := func(name string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("etcd", 0o755)
	write("etcdutl", 0o644) // not executable
	if err := os.Mkdir(filepath.Join(dir, "kube-apiserver"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		names   []string
		missing string // "" when every one is found
	}{
		{name: "executable", names: []string{"etcd"}},
		{name: "not executable", names: []string{"etcd", "etcdutl"}, missing: "etcdutl"},
		{name: "a directory", names: []string{"kube-apiserver", "etcd"}, missing: "kube-apiserver"},
		{name: "absent", names: []string{"etcd", "nothing"}, missing: "nothing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, reason := testbin.Find(tt.names...)
			if got != dir {
				t.Errorf("Find(%q) dir = %q, want %q", tt.names, got, dir)
			}
			if tt.missing == "" {
				if reason != "" {
					t.Errorf("Find(%q) = %q, want no reason", tt.names, reason)
				}
				return
			}
			if !strings.Contains(reason, "no "+tt.missing+" binary") || !strings.Contains(reason, testbin.BuildCommand) {
				t.Errorf("Find(%q) = %q, want it to name %s and %q", tt.names, reason, tt.missing, testbin.BuildCommand)
			}
		})
	}
}

// TestRequireWithoutBinary: the test-server rule. A local run skips, CI
// fails; both name the build command.
func TestRequireWithoutBinary(t *testing.T) {
	t.Setenv(testbin.EnvBin, t.TempDir()) // empty
	childproc.CheckMissing(t, func(tb testing.TB) { testbin.Require(tb, "etcd") }, testbin.BuildCommand, "")
}

// TestRequireFinds returns the directory when the binaries are there.
func TestRequireFinds(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "etcd"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(testbin.EnvBin, dir)
	if got := testbin.Require(t, "etcd"); got != dir {
		t.Errorf("Require() = %q, want %q", got, dir)
	}
}
