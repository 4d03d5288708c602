package cdc

import (
	"errors"
	"strings"
	"testing"

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
