package prom_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/resumable-go/resumable/metrics/prom"
)

// change is one call of an OwnerHook.
type change struct {
	member string
	owned  bool
	err    error
}

var errLost = errors.New("test: lease lost")

func TestOwnerHook(t *testing.T) {
	tests := []struct {
		name    string
		changes []change
		want    map[string]float64
	}{
		{
			name: "none",
			want: map[string]float64{},
		},
		{
			name: "owned, handed off, lost",
			changes: []change{
				{member: "w1", owned: true}, {member: "w1", owned: true}, {member: "w1", owned: true},
				{member: "w2", owned: true},
				{member: "w1", owned: false},
				{member: "w1", owned: false, err: errLost},
				{member: "w2", owned: false, err: errLost},
			},
			want: map[string]float64{
				`owned_streams{member="w1"}`:      1,
				`handoffs_total{member="w1"}`:     1,
				`owner_losses_total{member="w1"}`: 1,
				`owned_streams{member="w2"}`:      0,
				`handoffs_total{member="w2"}`:     0,
				`owner_losses_total{member="w2"}`: 1,
			},
		},
		{
			name:    "a bad name",
			changes: []change{{member: "w\xff", owned: true}},
			want: map[string]float64{
				"owned_streams{member=\"w\uFFFD\"}":      1,
				"handoffs_total{member=\"w\uFFFD\"}":     0,
				"owner_losses_total{member=\"w\uFFFD\"}": 0,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCollector(t)
			hook := prom.OwnerHook(c)
			for _, ch := range tt.changes {
				hook(ch.member, ch.owned, ch.err)
			}
			if diff := cmp.Diff(tt.want, values(t, c)); diff != "" {
				t.Errorf("series (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOwnerHookNilCollector(t *testing.T) {
	prom.OwnerHook(nil)("w1", true, nil) // counts nothing, and does not panic
}
