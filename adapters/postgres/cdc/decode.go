package cdc

import (
	"encoding/binary"
	"errors"

	"github.com/jackc/pglogrepl"
)

// errShortChange is the failure of decodeChange on a message cut short.
var errShortChange = errors.New("cdc: a pgoutput change message cut short")

// decoded is an Insert, Update or Delete message of pgoutput (protocol 1).
type decoded struct {
	op       Op
	rel      uint32
	old, new []*pglogrepl.TupleDataColumn // nil: not sent
	oldType  uint8                        // 'K': old holds the key only; 'O': the whole old row
}

// decodeChange decodes an Insert, Update or Delete message. It makes three
// allocations per tuple, where pglogrepl.Parse makes two per column and
// three per message besides.
func decodeChange(d []byte) (ch decoded, err error) {
	if len(d) < 6 {
		return ch, errShortChange
	}
	switch d[0] {
	case 'I':
		ch.op = Insert
	case 'U':
		ch.op = Update
	default:
		ch.op = Delete
	}
	ch.rel = binary.BigEndian.Uint32(d[1:])
	d = d[5:]
	if d[0] == 'K' || d[0] == 'O' {
		ch.oldType = d[0]
		if ch.old, d, err = decodeTuple(d[1:]); err != nil {
			return ch, err
		}
	}
	if ch.op == Delete {
		return ch, nil
	}
	if len(d) == 0 || d[0] != 'N' {
		return ch, errShortChange
	}
	ch.new, _, err = decodeTuple(d[1:])
	return ch, err
}

// decodeTuple decodes the TupleData at the start of d and returns what
// follows it. The columns and their values share their memory.
func decodeTuple(d []byte) (cols []*pglogrepl.TupleDataColumn, rest []byte, err error) {
	if len(d) < 2 {
		return nil, nil, errShortChange
	}
	n := int(binary.BigEndian.Uint16(d))
	// First the size of the values, so that they take one allocation.
	size, p := 0, 2
	for range n {
		if p >= len(d) {
			return nil, nil, errShortChange
		}
		kind := d[p]
		p++
		if kind == pglogrepl.TupleDataTypeText || kind == pglogrepl.TupleDataTypeBinary {
			if p+4 > len(d) {
				return nil, nil, errShortChange
			}
			l := int(binary.BigEndian.Uint32(d[p:]))
			if l < 0 || p+4+l > len(d) {
				return nil, nil, errShortChange
			}
			size += l
			p += 4 + l
		}
	}
	data := make([]byte, 0, size)
	vals := make([]pglogrepl.TupleDataColumn, n)
	cols = make([]*pglogrepl.TupleDataColumn, n)
	p = 2
	for i := range vals {
		v := &vals[i]
		v.DataType = d[p]
		p++
		if v.DataType == pglogrepl.TupleDataTypeText || v.DataType == pglogrepl.TupleDataTypeBinary {
			l := int(binary.BigEndian.Uint32(d[p:]))
			p += 4
			off := len(data)
			data = append(data, d[p:p+l]...)
			v.Length, v.Data = uint32(l), data[off:off+l:off+l]
			p += l
		}
		cols[i] = v
	}
	return cols, d[p:], nil
}
