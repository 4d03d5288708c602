// Command concurrency measures ordered concurrency (stream.WithConcurrency,
// stream.WithOrderKey) in Confluent Parallel Consumer's own shape: 10,000
// events on one ordered stream, a handler that sleeps a seeded uniform
// 0–5 ms, keys 1, 10, 20, 1,000 and none, n = 16 and 64, against one
// handler at a time. It prints wall time and speedup per row, and checks in
// every keyed row that no two events of one key overlapped and that each
// key's events came in stream order.
//
//	go run ./bench/concurrency -csv docs/concurrency.csv -svg docs/concurrency.svg
//	go run ./bench/concurrency -quick            # 1,000 events
//	go run ./bench/concurrency -memory 1m        # one stuck event, an endless server
//	go run ./bench/concurrency -paged -events 20000   # a paged HTTP feed with a cursor.File
//
// The serial row takes about 25 s. See docs/concurrency.md.
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

// run parses args, runs the serial row and every concurrent row (or the
// memory run), prints the table to out and writes the CSV and the figure.
func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("concurrency", flag.ContinueOnError)
	fs.SetOutput(out)
	cfg := config{}
	fs.IntVar(&cfg.events, "events", 10_000, "events on the stream")
	quick := fs.Bool("quick", false, "1,000 events unless -events says otherwise")
	fs.DurationVar(&cfg.maxSleep, "max-sleep", 5*time.Millisecond, "the handler sleeps uniformly in [0, max-sleep]")
	fs.Uint64Var(&cfg.seed, "seed", 1, "seed of the sleeps and keys")
	fs.IntVar(&cfg.window, "window", 0, "stream.WithWindow (0: the default, max(64, 4·n))")
	keys := fs.String("keys", "1,10,20,1000,0", "comma-separated key counts (0: no key)")
	ns := fs.String("n", "16,64", "comma-separated handler counts")
	csvPath := fs.String("csv", "", "file to write the rows to (none if empty)")
	svgPath := fs.String("svg", "", "file to draw the speedups to (none if empty)")
	memory := fs.Duration("memory", 0, "instead of the table: one stuck event and an endless server for this long, heap sampled")
	paged := fs.Bool("paged", false, "instead of the table: a local HTTP feed paged by offset (-events, 100 a page, 50 keys, a 2 ms handler) with a cursor.File, n = 1 and each -n")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *quick && !flagSet(fs, "events") {
		cfg.events = 1_000
	}
	var err error
	if cfg.keys, err = ints(*keys, 0); err != nil {
		return fmt.Errorf("-keys: %w", err)
	}
	if cfg.ns, err = ints(*ns, 1); err != nil {
		return fmt.Errorf("-n: %w", err)
	}
	if cfg.events < 1 || cfg.maxSleep < 0 || cfg.window < 0 {
		return errors.New("concurrency: -events must be positive, -max-sleep and -window not negative")
	}
	if *paged {
		dir, err := os.MkdirTemp("", "paged")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		return runPaged(ctx, pagedConfig{events: cfg.events, perPage: 100, keys: 50, sleep: 2 * time.Millisecond, ns: cfg.ns, dir: dir}, out)
	}
	if *memory > 0 {
		return runMemory(ctx, memConfig{duration: *memory, n: 16, keys: 20, window: cfg.window}, out)
	}

	var slept time.Duration
	for _, it := range makeLog(cfg) {
		slept += it.Sleep
	}
	fmt.Fprintf(out, "%d events, handler sleeping uniformly 0–%v (seed %d), %v of sleeps in all; serial is n = 1;\n", cfg.events, cfg.maxSleep, cfg.seed, slept.Round(time.Millisecond))
	fmt.Fprintln(out, "speedup is over the measured serial run, \"vs the sleeps\" over their sum (a serial run with no timer overhead)")
	rows, err := measure(ctx, cfg, func(r row) { fmt.Fprintf(out, "  %s\n", r.label()) })
	if err != nil {
		return err
	}
	writeTable(out, rows)
	if *csvPath != "" {
		if err := writeFile(*csvPath, func(w io.Writer) error { return writeCSV(w, rows) }); err != nil {
			return err
		}
	}
	if *svgPath != "" {
		if err := writeFile(*svgPath, func(w io.Writer) error { return writeSVG(w, cfg, rows) }); err != nil {
			return err
		}
	}
	for _, r := range rows {
		if r.Violations > 0 {
			return fmt.Errorf("concurrency: %s: %d per-key order violations", r.label(), r.Violations)
		}
	}
	return nil
}

// flagSet reports whether the flag name was given.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// ints parses a comma-separated list of integers, each at least least.
func ints(s string, least int) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		if n < least {
			return nil, fmt.Errorf("%d is below %d", n, least)
		}
		out = append(out, n)
	}
	return out, nil
}

// writeTable prints the rows aligned.
func writeTable(out io.Writer, rows []row) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "keys\tn\twindow\twall\tspeedup\tgoal\tvs the sleeps\tmax in flight\torder\t")
	for _, r := range rows {
		goal, order := "", "ok"
		if r.Goal > 0 {
			mark := "met"
			if r.Speedup < r.Goal {
				mark = "MISSED"
			}
			goal = fmt.Sprintf("≥%.0f× %s", r.Goal, mark)
		}
		if r.Violations > 0 {
			order = fmt.Sprintf("%d violations", r.Violations)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%v\t%.2f×\t%s\t%.2f×\t%d\t%s\t\n",
			r.keyLabel(), r.N, r.Window, r.Wall.Round(time.Millisecond), r.Speedup, goal, r.VsSleeps, r.MaxInFlight, order)
	}
	tw.Flush()
}

// csvHeader names the CSV columns.
var csvHeader = []string{"keys", "n", "window", "wall_s", "speedup", "goal", "speedup_vs_sleeps", "max_in_flight", "order_violations"}

// writeCSV writes one line per row.
func writeCSV(w io.Writer, rows []row) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	for _, r := range rows {
		err := cw.Write([]string{
			r.keyLabel(), strconv.Itoa(r.N), strconv.Itoa(r.Window),
			strconv.FormatFloat(r.Wall.Seconds(), 'f', 3, 64),
			strconv.FormatFloat(r.Speedup, 'f', 2, 64),
			strconv.FormatFloat(r.Goal, 'f', 0, 64),
			strconv.FormatFloat(r.VsSleeps, 'f', 2, 64),
			strconv.Itoa(r.MaxInFlight), strconv.Itoa(r.Violations),
		})
		if err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// writeFile creates path and writes it with write.
func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("concurrency: writing %s: %w", path, err)
	}
	return f.Close()
}
