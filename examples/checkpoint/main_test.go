package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestDemo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, &out, nil); err != nil {
		t.Fatalf("run() = %v, want nil; output:\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "continued at order 18 with no gap") {
		t.Errorf("output lacks the end check:\n%s", out.String())
	}
}

func TestStateFileContinuesAcrossRuns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.cursor")
	args := []string{"-state", path, "-events", "12", "-tick", "0s"}
	var out bytes.Buffer
	if err := run(context.Background(), &out, args); err != nil {
		t.Fatalf("first run() = %v, want nil", err)
	}
	if !strings.Contains(out.String(), "handled order-12") {
		t.Fatalf("first run did not reach the end:\n%s", out.String())
	}
	out.Reset()
	if err := run(context.Background(), &out, args); err != nil {
		t.Fatalf("second run() = %v, want nil", err)
	}
	if strings.Contains(out.String(), "handled") {
		t.Errorf("second run handled events again, want none:\n%s", out.String())
	}
}
