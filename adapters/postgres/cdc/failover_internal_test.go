package cdc

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/resumable-go/resumable/stream"
)

func TestParseHistory(t *testing.T) {
	h, err := parseHistory([]byte("1\t0/3000148\tno recovery target specified\n\n# comment\n2\t0/50001A0\tno recovery target specified\n"))
	if err != nil {
		t.Fatalf("parseHistory() = %v", err)
	}
	if len(h) != 2 || h[1] != 0x3000148 || h[2] != 0x50001A0 {
		t.Fatalf("parseHistory() = %v, want 1 → 0/3000148, 2 → 0/50001A0", h)
	}
	if _, err := parseHistory([]byte("x\t0/1\n")); err == nil {
		t.Fatalf("parseHistory(bad timeline) = nil error")
	}
}

func TestCheckTimeline(t *testing.T) {
	id := identity{system: "7", timeline: 3, slot: "s", history: history{1: 0x100, 2: 0x200}}
	for _, tc := range []struct {
		name  string
		after Cursor
		want  string // empty: accepted
	}{
		{name: "same timeline", after: Cursor{LSN: 0x900, Index: 0, System: "7", Timeline: 3}},
		{name: "before the branch", after: Cursor{LSN: 0x1ff, Index: 2, System: "7", Timeline: 2}},
		{name: "grandparent before its branch", after: Cursor{LSN: 0x80, Index: 0, System: "7", Timeline: 1}},
		{name: "progress at the branch", after: Cursor{LSN: 0x200, Index: -1, System: "7", Timeline: 2}},
		{name: "commit at the branch", after: Cursor{LSN: 0x200, Index: 0, System: "7", Timeline: 2},
			want: `slot "s": timeline: was 2, now 3, which branched from timeline 2 at 0/200, before the cursor 0/200 #0`},
		{name: "after the branch", after: Cursor{LSN: 0x150, Index: 0, System: "7", Timeline: 1},
			want: "branched from timeline 1 at 0/100, before the cursor 0/150 #0"},
		{name: "not an ancestor", after: Cursor{LSN: 0x10, Index: 0, System: "7", Timeline: 5},
			want: "timeline: was 5, now 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := id.check(tc.after)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("check() = %v, want nil", err)
				}
				if !id.matches(tc.after) {
					t.Errorf("matches() = false, want true")
				}
				return
			}
			if !errors.Is(err, stream.ErrSourceChanged) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("check() = %v, want ErrSourceChanged with %q", err, tc.want)
			}
			if id.matches(tc.after) {
				t.Errorf("matches() = true, want false")
			}
		})
	}
	var none history
	if _, ok := none.covers(Cursor{LSN: pglogrepl.LSN(1), Timeline: 1}); ok {
		t.Errorf("covers() on no history = true")
	}
}

// TestCommitTimeOfSaves: a saved cursor takes the commit time of its
// transaction; a position with nothing in flight is caught up (now); the
// transactions it covers are forgotten, and at most maxMarks are kept.
func TestCommitTimeOfSaves(t *testing.T) {
	s := &Source{}
	s.tracking.Store(true)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range 3 {
		s.noteBegin(pglogrepl.LSN(0x100*(i+1)), t0.Add(time.Duration(i)*time.Second))
	}
	s.hold(Cursor{LSN: 0x200, Index: 1})
	if got := s.committedAt; !got.Equal(t0.Add(time.Second)) {
		t.Fatalf("commit time after a save at the 2nd transaction = %v, want %v", got, t0.Add(time.Second))
	}
	if len(s.marks) != 1 || s.marks[0].lsn != 0x300 {
		t.Fatalf("marks = %v, want the 3rd transaction's only", s.marks)
	}
	before := time.Now()
	s.hold(Cursor{LSN: 0x400, Index: -1}) // a Progress position past everything
	if got := s.committedAt; got.Before(before) || len(s.marks) != 0 {
		t.Fatalf("after a Progress save: commit time %v (want now), marks %v (want none)", got, s.marks)
	}
	for i := range maxMarks + 10 {
		s.noteBegin(pglogrepl.LSN(0x1000+i), t0)
	}
	if len(s.marks) > maxMarks {
		t.Fatalf("%d marks kept, want at most %d", len(s.marks), maxMarks)
	}
	var untracked Source
	untracked.noteBegin(0x100, t0)
	if len(untracked.marks) != 0 {
		t.Fatalf("a Source without a Store noted %d transactions", len(untracked.marks))
	}
}
