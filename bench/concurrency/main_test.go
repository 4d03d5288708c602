package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// A tiny run of the whole program: the table has a row per configuration,
// the CSV and the figure are well formed, every row handled every event
// (run checks it) and per-key order held. Not a timing check.
func TestQuickRun(t *testing.T) {
	dir := t.TempDir()
	csvPath, svgPath := filepath.Join(dir, "rows.csv"), filepath.Join(dir, "speedup.svg")
	var out bytes.Buffer
	err := run(context.Background(), []string{
		"-quick", "-events", "300", "-max-sleep", "1ms", "-keys", "1,20,0", "-n", "4,16",
		"-csv", csvPath, "-svg", svgPath,
	}, &out)
	if err != nil {
		t.Fatalf("run() = %v\n%s", err, out.String())
	}
	t.Log(out.String())

	const rows = 1 + 3*2 // serial, then keys × n
	if got := strings.Count(out.String(), "ok\n"); got != rows {
		t.Errorf("the table has %d rows whose order held, want %d", got, rows)
	}

	f, err := os.Open(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("reading the CSV: %v", err)
	}
	if len(recs) != rows+1 || strings.Join(recs[0], ",") != strings.Join(csvHeader, ",") {
		t.Fatalf("CSV has %d records with header %q, want %d with %q", len(recs), recs[0], rows+1, csvHeader)
	}
	wantKeys := []string{"serial", "1", "1", "20", "20", "none", "none"}
	for i, rec := range recs[1:] {
		if rec[0] != wantKeys[i] {
			t.Errorf("CSV row %d keys = %q, want %q", i+1, rec[0], wantKeys[i])
		}
		for _, col := range rec[1:] {
			if _, err := strconv.ParseFloat(col, 64); err != nil {
				t.Errorf("CSV row %d: %q is not a number", i+1, col)
			}
		}
		if rec[8] != "0" {
			t.Errorf("CSV row %d: %s per-key order violations, want 0", i+1, rec[8])
		}
	}

	svg, err := os.ReadFile(svgPath)
	if err != nil {
		t.Fatal(err)
	}
	bars := 0
	dec := xml.NewDecoder(bytes.NewReader(svg))
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the figure is not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "rect" && len(se.Attr) > 0 && se.Attr[0].Name.Local == "x" {
			for _, a := range se.Attr {
				if a.Name.Local == "width" && a.Value != "14" { // not a legend swatch
					bars++
				}
			}
		}
	}
	if bars != rows-1 {
		t.Errorf("the figure has %d bars, want %d", bars, rows-1)
	}
}

// The memory run holds one event and samples the heap; a short one checks
// that it reports and ends.
func TestMemoryRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-memory", "300ms"}, &out); err != nil {
		t.Fatalf("run() = %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "heap in use over") {
		t.Errorf("no summary in:\n%s", out.String())
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-events", "0"}, {"-keys", "x"}, {"-n", "0"}, {"-window", "-1"}} {
		if err := run(context.Background(), args, io.Discard); err == nil {
			t.Errorf("run(%q) = nil, want an error", args)
		}
	}
}
