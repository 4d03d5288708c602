package cdc

import (
	"encoding/binary"
	"fmt"

	"github.com/jackc/pglogrepl"
)

// A packed row holds the text values of a row read by SQL (a snapshot's,
// a backfill's, a resync's) in one byte slice, so that a batch of rows is
// one allocation without pointers rather than a few per row:
//
//	ncols uint16 | end uint32 × ncols | value 0, sep, value 1, sep, …
//
// Value i spans from just after value i-1's end (its separator skipped; 0
// for the first) to its end, both offsets into the values. An end with
// packedNull set is a NULL, whose value is empty.
const (
	packedNull = 1 << 31
	packedMask = packedNull - 1
)

// packedHeader is the size of the header of a packed row of ncols columns.
func packedHeader(ncols int) int { return 2 + 4*ncols }

// packedLen returns the number of columns of the packed row p.
func packedLen(p []byte) int { return int(binary.LittleEndian.Uint16(p)) }

// packedCol returns column i of the packed row p: its value and its kind
// (pglogrepl.TupleDataTypeText or TupleDataTypeNull). The value's capacity
// ends with it.
func packedCol(p []byte, i int) ([]byte, byte) {
	n := packedLen(p)
	if uint(i) >= uint(n) {
		panic(fmt.Sprintf("cdc: column %d of a row of %d columns", i, n))
	}
	end := binary.LittleEndian.Uint32(p[2+4*i:])
	if end&packedNull != 0 {
		return nil, pglogrepl.TupleDataTypeNull
	}
	start := 0
	if i > 0 {
		start = int(binary.LittleEndian.Uint32(p[4*i-2:])&packedMask) + 1
	}
	base := packedHeader(n)
	return p[base+start : base+int(end) : base+int(end)], pglogrepl.TupleDataTypeText
}

// growBy extends b by n bytes, of any value.
func growBy(b []byte, n int) []byte {
	if len(b)+n <= cap(b) {
		return b[:len(b)+n]
	}
	return append(b, make([]byte, n)...)
}
