// Package integration_test runs the etcd adapter against a real etcd
// cluster of three member processes (package internal/cluster), and runs
// the example program (examples/etcd) as separate worker processes that it
// kills, pauses and stops.
//
// The tests are opt-in: without RESUMABLE_ETCD_INTEGRATION=1 and the etcd
// binary of scripts/testenv.sh build, each one skips with a one-line
// reason. Run them with
//
//	RESUMABLE_ETCD_INTEGRATION=1 RESUMABLE_TESTENV_BIN=$(bash scripts/testenv.sh build) \
//		go test -race -count=1 -v ./adapters/etcd/integration/
package integration_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/resumable-go/resumable/adapters/etcd/internal/cluster"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if example.dir != "" {
		os.RemoveAll(example.dir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// example is the example program, built once per test run.
var example struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// exampleBinary builds examples/etcd (once per run) and returns its path. It
// skips t as cluster.Skip does, so that nothing is built when the
// integration tests are off.
func exampleBinary(t *testing.T) string {
	t.Helper()
	cluster.Skip(t)
	example.once.Do(func() {
		example.dir, example.err = os.MkdirTemp("", "resumable-etcd-example-")
		if example.err != nil {
			return
		}
		example.bin = filepath.Join(example.dir, "etcd-example")
		cmd := exec.Command("go", "build", "-race", "-o", example.bin, ".")
		cmd.Dir = filepath.Join("..", "..", "..", "examples", "etcd")
		if out, err := cmd.CombinedOutput(); err != nil {
			example.err = fmt.Errorf("go build ./examples/etcd: %v\n%s", err, out)
		}
	})
	if example.err != nil {
		t.Fatal(example.err)
	}
	return example.bin
}
