package digits_test

import (
	"testing"

	"github.com/resumable-go/resumable/internal/digits"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in     string
		limit  int64
		want   int64
		wantOK bool
	}{
		{in: "0", limit: 100, want: 0, wantOK: true},
		{in: "0042", limit: 100, want: 42, wantOK: true},
		{in: "100", limit: 100, want: 100, wantOK: true},
		{in: "1000", limit: 100, want: 1000, wantOK: true},
		{in: "99999999999999999999999999", limit: 100, want: 999, wantOK: true}, // stops counting once above the limit
		{in: "", limit: 100},
		{in: "-1", limit: 100},
		{in: "+1", limit: 100},
		{in: " 1", limit: 100},
		{in: "1.5", limit: 100},
		{in: "12a", limit: 100},
	}
	for _, tt := range tests {
		got, ok := digits.Parse(tt.in, tt.limit)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("Parse(%q, %d) = %d, %v; want %d, %v", tt.in, tt.limit, got, ok, tt.want, tt.wantOK)
		}
		if gotB, okB := digits.Parse([]byte(tt.in), tt.limit); gotB != got || okB != ok {
			t.Errorf("Parse([]byte(%q)) = %d, %v; want the string's %d, %v", tt.in, gotB, okB, got, ok)
		}
	}
}
