package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/resumable-go/resumable/deadletter"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	var out bytes.Buffer
	if err := run(ctx, &out, []string{"-dir", dir}); err != nil {
		t.Fatalf("run() = %v, want nil; output:\n%s", err, out.String())
	}
	want := `-- the stream: 12 orders
booked order 1: alice, 12.00
booked order 2: bob, 4.50
try 1 of order 3: order 3: unknown customer "zed" -> parked
booked order 4: carol, 70.00
booked order 5: alice, 0.80
try 1 of order 6: order 6: ledger busy -> retried
booked order 6: dave, 15.00
try 1 of order 7: order 7: unknown customer "yan" -> parked
booked order 8: bob, 6.10
booked order 9: erin, 25.00
try 1 of order 10: order 10: unknown customer "zed" -> parked
booked order 11: carol, 9.00
booked order 12: frank, 1.30
stream ended at cursor 12: 9 orders booked, 3 parked, 1 retried
-- the cause is fixed: customers zed and yan imported; replaying the parked orders
replaying order 3, parked after 1 try: order 3: unknown customer "zed"
booked order 3: zed, 9.99
replaying order 7, parked after 1 try: order 7: unknown customer "yan"
booked order 7: yan, 3.00
replaying order 10, parked after 1 try: order 10: unknown customer "zed"
booked order 10: zed, 0.45
replayed 3 orders; the file is now parked.jsonl.replayed
done: all 12 orders booked, each once
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	data, err := os.ReadFile(filepath.Join(dir, "parked.jsonl.replayed"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n != 3 {
		t.Errorf("the replayed file holds %d lines, want 3:\n%s", n, data)
	}
}

// An order parked twice (a crash between its park and its commit) is
// replayed once.
func TestReplayOncePerCursor(t *testing.T) {
	path := filepath.Join(t.TempDir(), "parked.jsonl")
	dl, err := deadletter.Open(path, orderSeq)
	if err != nil {
		t.Fatal(err)
	}
	o := Order{Seq: 3, Customer: "zed", Cents: 999}
	for range 2 {
		if err := dl.Park(context.Background(), o, errors.New("unknown customer")); err != nil {
			t.Fatalf("Park() = %v", err)
		}
	}
	if err := dl.Close(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	s := &shop{out: &out, customers: map[string]bool{"zed": true}, booked: make(map[int64]bool)}
	n, err := replay(context.Background(), &out, s, path)
	if err != nil || n != 1 {
		t.Fatalf("replay() = %d, %v; want 1, nil", n, err)
	}
	if got := strings.Count(out.String(), "booked order 3"); got != 1 {
		t.Errorf("order 3 booked %d times, want once:\n%s", got, out.String())
	}
}
