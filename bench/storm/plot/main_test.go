package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testSummary = `variant,label,n,outage_s,limit,burst,peak_calls_per_bin,bin_s,peak_calls_per_s,reconnected_s,after_server_up_s,calls,refused,timer_lag_s
client-go,client-go RetryWatcher,4,2,2,1,4,0.1,4,3.000,1.000,12,8,0
ours-limiter,shared rate.Limiter,4,2,2,1,1,0.1,2,4.000,2.000,6,2,0.001
`

const testSeries = `variant,t_s,calls,refused,connected
client-go,-0.1,0,0,4
client-go,0,4,4,0
client-go,1,4,4,0
client-go,2,4,0,4
ours-limiter,-0.1,0,0,4
ours-limiter,0,1,1,0
ours-limiter,2,2,0,2
ours-limiter,3,2,0,4
`

// TestPlot draws a small storm and checks that the SVG carries the
// legend's figures.
func TestPlot(t *testing.T) {
	dir := t.TempDir()
	sum, series, out := filepath.Join(dir, "s.csv"), filepath.Join(dir, "t.csv"), filepath.Join(dir, "storm.svg")
	write(t, sum, testSummary)
	write(t, series, testSeries)
	if err := run([]string{"-summary", sum, "-csv", series, "-o", out}); err != nil {
		t.Fatalf("run() = %v", err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	svg := string(b)
	for _, want := range []string{"<svg", "client-go RetryWatcher: all back at 3.0s, peak 4 calls/s",
		"shared rate.Limiter (2/s, burst 1): all back at 4.0s, peak 2 calls/s", "watchers connected"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the SVG lacks %q", want)
		}
	}
}

func TestPlotBadInput(t *testing.T) {
	tests := []struct {
		name            string
		summary, series string
	}{
		{name: "summary with a missing column", summary: "a,b\n1,2\n", series: testSeries},
		{name: "series without data", summary: testSummary, series: "variant,t_s,calls,refused,connected\n"},
		{name: "series with a bad number", summary: testSummary, series: "variant,t_s,calls,refused,connected\nclient-go,x,1,0,0\n"},
		{name: "a variant without rows", summary: testSummary, series: "variant,t_s,calls,refused,connected\nclient-go,0,1,0,0\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			sum, series := filepath.Join(dir, "s.csv"), filepath.Join(dir, "t.csv")
			write(t, sum, tt.summary)
			write(t, series, tt.series)
			err := run([]string{"-summary", sum, "-csv", series, "-o", filepath.Join(dir, "o.svg")})
			if !errors.Is(err, errInput) {
				t.Errorf("run() = %v, want an error matching %v", err, errInput)
			}
		})
	}
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
