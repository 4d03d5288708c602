package main

import (
	"bytes"
	"encoding/csv"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestStorm runs the whole program on a small fleet in a synctest bubble,
// where time is fake: every watcher that wakes at an instant acts at that
// instant, so the figures are exact and the run takes a fraction of a second.
func TestStorm(t *testing.T) {
	const n, limit, burst = 200, 100, 10
	dir := t.TempDir()
	series, summary := filepath.Join(dir, "storm.csv"), filepath.Join(dir, "summary.csv")
	var out bytes.Buffer
	synctest.Test(t, func(t *testing.T) {
		err := run(t.Context(), []string{"-n", strconv.Itoa(n), "-limit", strconv.Itoa(limit), "-burst", strconv.Itoa(burst),
			"-outage", "2.5s", "-csv", series, "-summary", summary}, &out)
		if err != nil {
			t.Fatalf("run() = %v", err)
		}
	})
	t.Logf("output:\n%s", &out)

	sum := readCSV(t, summary)
	if diff := cmp.Diff(summaryHeader, sum[0]); diff != "" {
		t.Fatalf("summary header (-want +got):\n%s", diff)
	}
	byKey := make(map[string]map[string]float64)
	for _, rec := range sum[1:] {
		m := make(map[string]float64)
		for i, h := range summaryHeader {
			if v, err := strconv.ParseFloat(rec[i], 64); err == nil {
				m[h] = v
			}
		}
		byKey[rec[0]] = m
	}
	for _, v := range variants {
		s, ok := byKey[v.key]
		if !ok {
			t.Errorf("summary has no row for %s", v.key)
			continue
		}
		if s["reconnected_s"] < 2.5 {
			t.Errorf("%s: all back %vs after the drop, want >= the 2.5s outage", v.key, s["reconnected_s"])
		}
		if accepted := s["calls"] - s["refused"]; accepted != n || s["refused"] < 1 {
			t.Errorf("%s: %v calls, %v refused, want some refused and every watcher reconnected once", v.key, s["calls"], s["refused"])
		}
		if v.key != "ours-limiter" && s["refused"] < n {
			t.Errorf("%s: %v refused, want >= %d: every watcher retries at once when its watch is dropped", v.key, s["refused"], n)
		}
	}
	// client-go's watchers all retry at once; the limiter caps the rate.
	if got := byKey["client-go"]["peak_calls_per_bin"]; got != n {
		t.Errorf("client-go: peak %v calls per bin, want %d (every watcher at once)", got, n)
	}
	// Our RetryWatcher with its defaults is a drop-in: it makes the same
	// calls at the same (fake) times as client-go's.
	for _, k := range []string{"calls", "refused", "reconnected_s", "peak_calls_per_s"} {
		if cg, ours := byKey["client-go"][k], byKey["ours-default"][k]; cg != ours {
			t.Errorf("%s: client-go %v, ours-default %v, want equal", k, cg, ours)
		}
	}
	lim := byKey["ours-limiter"]
	if lim["peak_calls_per_s"] > limit+burst {
		t.Errorf("ours-limiter: peak %v calls/s, want <= limit + burst = %d", lim["peak_calls_per_s"], limit+burst)
	}
	if max := 1.1 * n / limit; lim["after_server_up_s"] > max {
		t.Errorf("ours-limiter: all back %vs after the server came back, want <= 1.1 N/limit = %vs", lim["after_server_up_s"], max)
	}

	rows := readCSV(t, series)
	if diff := cmp.Diff(seriesHeader, rows[0]); diff != "" {
		t.Fatalf("series header (-want +got):\n%s", diff)
	}
	// Per variant: connected before the drop and at the end, none in the
	// first bin after it.
	connected := make(map[string]map[string]string)
	last := make(map[string]string)
	for _, r := range rows[1:] {
		if connected[r[0]] == nil {
			connected[r[0]] = make(map[string]string)
		}
		connected[r[0]][r[1]] = r[4]
		last[r[0]] = r[4]
	}
	for _, v := range variants {
		got := [3]string{connected[v.key]["-0.1"], connected[v.key]["0"], last[v.key]}
		want := [3]string{strconv.Itoa(n), "0", strconv.Itoa(n)}
		if got != want {
			t.Errorf("%s: connected before the drop, just after it, at the end = %v, want %v", v.key, got, want)
		}
	}
}

// TestStormTimeout checks that a run that waits too long fails with a clear
// error and still stops every watcher (a goroutine left behind would make
// the synctest bubble fail).
func TestStormTimeout(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want error
	}{
		{name: "the limiter lets the watchers start too slowly",
			args: []string{"-variants", "ours-limiter", "-n", "50", "-limit", "10", "-burst", "1", "-timeout", "1s"}, want: errTimeout},
		{name: "the watchers reconnect too late",
			args: []string{"-variants", "client-go", "-n", "50", "-outage", "2.5s", "-timeout", "300ms"}, want: errIncomplete},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				if err := run(t.Context(), tt.args, new(bytes.Buffer)); !errors.Is(err, tt.want) {
					t.Errorf("run(%q) = %v, want an error matching %v", tt.args, err, tt.want)
				}
			})
		})
	}
}

func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil || len(recs) < 2 {
		t.Fatalf("reading %s: %d records, %v", path, len(recs), err)
	}
	return recs
}

func TestBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{name: "no watchers", args: []string{"-n", "0"}},
		{name: "lead not a multiple of bin", args: []string{"-lead", "150ms"}},
		{name: "zero limit", args: []string{"-limit", "0"}},
		{name: "unknown variant", args: []string{"-variants", "client-go,nope"}},
		{name: "negative outage", args: []string{"-outage", "-1s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := run(t.Context(), tt.args, new(bytes.Buffer)); !errors.Is(err, errUsage) {
				t.Errorf("run(%q) = %v, want an error matching %v", tt.args, err, errUsage)
			}
		})
	}
}

func TestPeakWindow(t *testing.T) {
	at := func(ms ...int) []time.Time {
		var ts []time.Time
		for _, m := range ms {
			ts = append(ts, time.Unix(0, 0).Add(time.Duration(m)*time.Millisecond))
		}
		return ts
	}
	tests := []struct {
		name string
		ts   []time.Time
		want int
	}{
		{name: "none", want: 0},
		{name: "one", ts: at(5), want: 1},
		{name: "window is half-open", ts: at(0, 1000), want: 1},
		{name: "just inside", ts: at(0, 999), want: 2},
		{name: "unsorted", ts: at(2500, 0, 1200, 1300, 2100), want: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := peakWindow(tt.ts, time.Second); got != tt.want {
				t.Errorf("peakWindow() = %d, want %d", got, tt.want)
			}
		})
	}
}
