// Command storm measures a reconnect storm: N watchers on one in-process
// API server that drops every watch at once, refuses new ones for a while,
// then accepts them again. It runs each kind of watcher in turn — client-go's
// RetryWatcher, ours with its defaults, ours with backoff.Default(), ours
// with a shared rate.Limiter — and reports, for each, the Watch calls per
// bin of time, the peak calls per second, and the time until every watcher
// was connected again.
//
//	go run ./bench/storm -n 10000 -csv docs/storm.csv -summary docs/storm-summary.csv
//
// It prints a table and writes two CSV files: the time series (one row per
// variant and bin: variant, t_s, calls, refused, connected) and the summary
// (one row per variant). scripts/storm.sh runs it and draws docs/storm.svg
// from the CSV with ./bench/storm/plot. See docs/storm.md.
package main

import (
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		stop()
		os.Exit(1)
	}
}

// run parses args, runs the variants one after the other, prints the table
// to out and writes the CSV files.
func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("storm", flag.ContinueOnError)
	cfg := config{}
	fs.IntVar(&cfg.n, "n", 10_000, "number of watchers")
	fs.DurationVar(&cfg.outage, "outage", 2500*time.Millisecond, "how long the server refuses Watch calls after dropping every watch")
	fs.DurationVar(&cfg.settle, "settle", 1500*time.Millisecond, "quiet time between all watchers connected and the drop")
	fs.DurationVar(&cfg.lead, "lead", time.Second, "time recorded before the drop (a multiple of -bin)")
	fs.DurationVar(&cfg.tail, "tail", time.Second, "time recorded after all watchers reconnected")
	fs.DurationVar(&cfg.bin, "bin", 100*time.Millisecond, "width of a bin of the time series")
	fs.Float64Var(&cfg.limit, "limit", 1000, "rate of the shared limiter, Watch calls per second")
	fs.IntVar(&cfg.burst, "burst", 100, "burst of the shared limiter")
	fs.DurationVar(&cfg.timeout, "timeout", 5*time.Minute, "bound on each wait: startup, reconnection, stop")
	only := fs.String("variants", "", "comma-separated variants to run (default all): "+keys())
	csvPath := fs.String("csv", "", "file to write the time series to (none if empty)")
	summaryPath := fs.String("summary", "", "file to write the summary to (none if empty)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := cfg.check(); err != nil {
		return err
	}
	vs, err := pick(*only)
	if err != nil {
		return err
	}

	fmt.Fprintf(out, "%d watchers; the server drops every watch at t0 and refuses Watch calls for %v; limiter %v/s, burst %d\n",
		cfg.n, cfg.outage, cfg.limit, cfg.burst)
	var results []result
	for _, v := range vs {
		fmt.Fprintf(out, "running %s...\n", v.key)
		res, err := runVariant(ctx, cfg, v)
		if err != nil {
			return err
		}
		results = append(results, res)
	}
	printTable(out, cfg, results)
	if *csvPath != "" {
		if err := writeFile(*csvPath, func(w *csv.Writer) error { return writeSeries(w, results) }); err != nil {
			return err
		}
	}
	if *summaryPath != "" {
		if err := writeFile(*summaryPath, func(w *csv.Writer) error { return writeSummary(w, cfg, results) }); err != nil {
			return err
		}
	}
	return nil
}

// errUsage is matched by the error of a bad flag value.
var errUsage = errors.New("storm: bad flag")

func (c config) check() error {
	switch {
	case c.n < 1:
		return fmt.Errorf("%w: -n %d: fewer than one watcher", errUsage, c.n)
	case c.bin <= 0:
		return fmt.Errorf("%w: -bin %v: not positive", errUsage, c.bin)
	case c.lead < 0 || c.lead%c.bin != 0:
		return fmt.Errorf("%w: -lead %v: not a multiple of -bin %v", errUsage, c.lead, c.bin)
	case c.outage < 0 || c.settle < 0 || c.tail < 0:
		return fmt.Errorf("%w: -outage, -settle and -tail must not be negative", errUsage)
	case c.limit <= 0 || c.burst < 1:
		return fmt.Errorf("%w: -limit %v, -burst %d: the limiter must allow something", errUsage, c.limit, c.burst)
	case c.timeout <= 0:
		return fmt.Errorf("%w: -timeout %v: not positive", errUsage, c.timeout)
	}
	return nil
}

func keys() string {
	var ks []string
	for _, v := range variants {
		ks = append(ks, v.key)
	}
	return strings.Join(ks, ",")
}

// pick returns the variants named in list, all when it is empty.
func pick(list string) ([]variant, error) {
	if list == "" {
		return variants, nil
	}
	var vs []variant
	for _, k := range strings.Split(list, ",") {
		i := -1
		for j, v := range variants {
			if v.key == k {
				i = j
			}
		}
		if i < 0 {
			return nil, fmt.Errorf("%w: -variants: no variant %q (have %s)", errUsage, k, keys())
		}
		vs = append(vs, variants[i])
	}
	return vs, nil
}

// printTable prints one line per variant, and the limiter's targets.
func printTable(out io.Writer, cfg config, results []result) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "variant\tpeak calls/%v\tpeak calls/s\tall back after t0\tafter server up\tWatch calls\trefused\ttimer lag\t\n", cfg.bin)
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.2fs\t%.2fs\t%d\t%d\t%v\t\n", r.v.key, r.peakBin, r.peakSecond,
			r.reconnected.Seconds(), r.recovered.Seconds(), r.calls, r.refused, r.lag.Round(time.Millisecond))
	}
	tw.Flush()
	for _, r := range results {
		if r.v.key != "ours-limiter" {
			continue
		}
		peakMax := cfg.limit + float64(cfg.burst)
		timeMax := 1.1 * float64(cfg.n) / cfg.limit
		fmt.Fprintf(out, "limiter targets: peak %d calls/s <= limit + burst = %.0f: %s; all back %.2fs after the server was up <= 1.1 N/limit = %.2fs: %s\n",
			r.peakSecond, peakMax, verdict(float64(r.peakSecond) <= peakMax),
			r.recovered.Seconds(), timeMax, verdict(r.recovered.Seconds() <= timeMax))
	}
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// writeFile writes a CSV file with fill.
func writeFile(path string, fill func(*csv.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("storm: %w", err)
	}
	w := csv.NewWriter(f)
	err = fill(w)
	w.Flush()
	err = errors.Join(err, w.Error(), f.Close())
	if err != nil {
		return fmt.Errorf("storm: writing %s: %w", path, err)
	}
	return nil
}

// seriesHeader is the time series' header.
var seriesHeader = []string{"variant", "t_s", "calls", "refused", "connected"}

func writeSeries(w *csv.Writer, results []result) error {
	if err := w.Write(seriesHeader); err != nil {
		return err
	}
	for _, r := range results {
		for _, row := range r.rows {
			rec := []string{r.v.key, seconds(row.t), strconv.Itoa(row.calls), strconv.Itoa(row.refused), strconv.Itoa(row.connected)}
			if err := w.Write(rec); err != nil {
				return err
			}
		}
	}
	return nil
}

// summaryHeader is the summary's header.
var summaryHeader = []string{"variant", "label", "n", "outage_s", "limit", "burst",
	"peak_calls_per_bin", "bin_s", "peak_calls_per_s", "reconnected_s", "after_server_up_s", "calls", "refused", "timer_lag_s"}

func writeSummary(w *csv.Writer, cfg config, results []result) error {
	if err := w.Write(summaryHeader); err != nil {
		return err
	}
	for _, r := range results {
		rec := []string{r.v.key, r.v.label, strconv.Itoa(cfg.n), seconds(cfg.outage),
			strconv.FormatFloat(cfg.limit, 'f', -1, 64), strconv.Itoa(cfg.burst),
			strconv.Itoa(r.peakBin), seconds(cfg.bin), strconv.Itoa(r.peakSecond),
			strconv.FormatFloat(r.reconnected.Seconds(), 'f', 3, 64), strconv.FormatFloat(r.recovered.Seconds(), 'f', 3, 64),
			strconv.Itoa(r.calls), strconv.Itoa(r.refused), seconds(r.lag)}
		if err := w.Write(rec); err != nil {
			return err
		}
	}
	return nil
}

// seconds formats d in seconds, as short as exact.
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}
