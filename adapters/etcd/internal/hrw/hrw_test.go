package hrw_test

import (
	"fmt"
	"testing"

	"github.com/resumable-go/resumable/adapters/etcd/internal/hrw"
)

func TestPickEmpty(t *testing.T) {
	if got, ok := hrw.Pick("s", nil); ok {
		t.Errorf("Pick(s, nil) = %q, true, want false", got)
	}
}

func TestPickIgnoresOrder(t *testing.T) {
	a, _ := hrw.Pick("s", []string{"w1", "w2", "w3"})
	b, _ := hrw.Pick("s", []string{"w3", "w1", "w2"})
	if a != b {
		t.Errorf("Pick() = %q in one order and %q in another", a, b)
	}
}

// TestSpread checks that streams spread over members and that removing a
// member moves only the streams it held.
func TestSpread(t *testing.T) {
	members := []string{"w1", "w2", "w3"}
	counts := map[string]int{}
	owner := map[string]string{}
	for i := range 3000 {
		s := fmt.Sprintf("stream-%d", i)
		m, _ := hrw.Pick(s, members)
		counts[m]++
		owner[s] = m
	}
	for _, m := range members {
		if counts[m] < 800 || counts[m] > 1200 {
			t.Errorf("member %s picked for %d of 3000 streams, want about 1000", m, counts[m])
		}
	}
	for s, was := range owner {
		now, _ := hrw.Pick(s, []string{"w1", "w3"})
		if was != "w2" && now != was {
			t.Errorf("Pick(%s) moved from %s to %s when w2 left", s, was, now)
		}
	}
}

// TestScoreStable pins scores: every release must pick as the ones before.
func TestScoreStable(t *testing.T) {
	tests := []struct {
		name, member, stream string
		want                 uint64
	}{
		{name: "short", member: "w1", stream: "orders", want: 0x9c0a1afe3a71a0cf},
		{name: "tenant", member: "worker-2", stream: "tenant-00042", want: 0x6afc18544558c9ba},
		{name: "empty", member: "", stream: "", want: 0x25fc6dd36ce04b20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := hrw.Score(tt.member, tt.stream); got != tt.want {
				t.Errorf("Score(%q, %q) = %#x, want %#x", tt.member, tt.stream, got, tt.want)
			}
		})
	}
}
