package cdc

import (
	"encoding/binary"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgtype"
)

// column is a column of a typed Relation message.
type column struct {
	name string
	oid  uint32
	key  bool
}

func typedRelationMsg(id uint32, table string, ident byte, cols ...column) []byte {
	b := []byte{'R'}
	b = binary.BigEndian.AppendUint32(b, id)
	b = append(append(b, "public"...), 0)
	b = append(append(b, table...), 0)
	b = append(b, ident)
	b = binary.BigEndian.AppendUint16(b, uint16(len(cols)))
	for _, c := range cols {
		flag := byte(0)
		if c.key {
			flag = 1
		}
		b = append(b, flag)
		b = append(append(b, c.name...), 0)
		b = binary.BigEndian.AppendUint32(b, c.oid)
		b = binary.BigEndian.AppendUint32(b, 0xFFFFFFFF)
	}
	return b
}

func beginAt(final pglogrepl.LSN, xid uint32, at time.Time) []byte {
	b := []byte{'B'}
	b = binary.BigEndian.AppendUint64(b, uint64(final))
	b = binary.BigEndian.AppendUint64(b, uint64(at.Sub(pgEpoch).Microseconds()))
	return binary.BigEndian.AppendUint32(b, xid)
}

func messageMsg(transactional bool, at pglogrepl.LSN, prefix, content string) []byte {
	b := []byte{'M', 0}
	if transactional {
		b[1] = 1
	}
	b = binary.BigEndian.AppendUint64(b, uint64(at))
	b = append(append(b, prefix...), 0)
	b = binary.BigEndian.AppendUint32(b, uint32(len(content)))
	return append(b, content...)
}

// updateFullMsg is an update with the whole old row (REPLICA IDENTITY FULL).
func updateFullMsg(rel uint32, old []any, values ...any) []byte {
	b := binary.BigEndian.AppendUint32([]byte{'U'}, rel)
	b = append(append(b, 'O'), tuple(old...)...)
	return append(append(b, 'N'), tuple(values...)...)
}

// events feeds msgs to c and returns the events delivered.
func events(t *testing.T, c *conn, msgs ...[]byte) []Event {
	t.Helper()
	var got []Event
	for _, m := range msgs {
		ev, ok, err := c.handle(m)
		for err == nil {
			if ok {
				got = append(got, ev)
			}
			if len(c.trunc) == 0 {
				break
			}
			ev, ok, err = c.truncated()
		}
		if err != nil {
			t.Fatalf("handle(%q) = %v", m[:1], err)
		}
	}
	return got
}

func TestConnTxEndAndCommitTime(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 8000, time.UTC)
	c := testConn(Cursor{})
	got := events(t, c,
		xlog(0x100, relationMsg(1, "public", "a", "id")),
		xlog(0x100, beginAt(0x900, 5, at)),
		xlog(0x200, insertMsg(1, "1")),
		xlog(0x300, insertMsg(1, "2")),
		xlog(0x300, truncateMsg(1, 1)),
		xlog(0x900, commitMsg(0x900)),
		xlog(0x900, beginAt(0xA00, 6, at.Add(time.Second))),
		xlog(0x900, insertMsg(1, "3")),
		xlog(0xA00, commitMsg(0xA00)),
	)
	type row struct {
		Op     Op
		Index  int
		TxEnd  bool
		Commit time.Time
	}
	var rows []row
	for _, ev := range got {
		rows = append(rows, row{Op: ev.Op, Index: ev.Index, TxEnd: ev.TxEnd, Commit: ev.CommitTime})
	}
	want := []row{
		{Op: Insert, Index: 0, Commit: at},
		{Op: Insert, Index: 1, Commit: at},
		{Op: Truncate, Index: 2, Commit: at},
		{Op: Truncate, Index: 3, TxEnd: true, Commit: at},
		{Op: Insert, Index: 0, TxEnd: true, Commit: at.Add(time.Second)},
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
}

func TestConnTxEndResumedAtLastChange(t *testing.T) {
	// Resumed after the whole transaction: nothing of it, and the next
	// transaction's change ends it.
	c := testConn(Cursor{LSN: 0x5000, Index: 4})
	got := events(t, c, append(tx(), xlog(0x6000, beginMsg(0x6000, 78)), xlog(0x6000, insertMsg(16384, "9", "z")), xlog(0x6000, commitMsg(0x6000)))...)
	if len(got) != 1 || got[0].LSN != 0x6000 || !got[0].TxEnd {
		t.Fatalf("events = %+v, want one of 0/6000 with TxEnd", got)
	}
}

func TestConnMessages(t *testing.T) {
	tests := []struct {
		name     string
		prefixes []string
		on       bool
		after    Cursor
		want     []string
	}{
		{name: "off", want: []string{"INSERT 0/900 #1 end=true"}},
		{name: "all", on: true, want: []string{"MESSAGE a 0/150 #-1 end=true", "MESSAGE outbox 0/900 #0 end=false", "INSERT 0/900 #1 end=false", "MESSAGE other 0/900 #2 end=true"}},
		{name: "prefix", on: true, prefixes: []string{"outbox"}, want: []string{"MESSAGE outbox 0/900 #0 end=false", "INSERT 0/900 #1 end=true"}},
		{name: "resumed", on: true, after: Cursor{LSN: 0x900, Index: 0}, want: []string{"INSERT 0/900 #1 end=false", "MESSAGE other 0/900 #2 end=true"}},
		{name: "resumed after a non-transactional one", on: true, after: Cursor{LSN: 0x150, Index: -1}, want: []string{"MESSAGE outbox 0/900 #0 end=false", "INSERT 0/900 #1 end=false", "MESSAGE other 0/900 #2 end=true"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testConn(tt.after)
			if tt.on {
				WithMessages(tt.prefixes...).applySource(c.src)
			}
			got := events(t, c,
				xlog(0x100, relationMsg(1, "public", "a", "id")),
				xlog(0x100, messageMsg(false, 0x150, "a", "x")),
				xlog(0x100, messageMsg(false, 0x160, watermarkPrefix+".low", "x")),
				xlog(0x200, beginMsg(0x900, 5)),
				xlog(0x300, messageMsg(true, 0x300, "outbox", `{"id":1}`)),
				xlog(0x400, insertMsg(1, "1")),
				xlog(0x500, messageMsg(true, 0x500, "other", "y")),
				xlog(0x900, commitMsg(0x900)),
			)
			var lines []string
			for _, ev := range got {
				s := ev.Op.String()
				if ev.Op == Message {
					s += " " + ev.Prefix
				}
				lines = append(lines, s+" "+ev.Cursor.LSN.String()+" #"+strconv.Itoa(ev.Cursor.Index)+" end="+strconv.FormatBool(ev.TxEnd))
			}
			if diff := cmp.Diff(tt.want, lines); diff != "" {
				t.Fatalf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTupleTyped(t *testing.T) {
	c := testConn(Cursor{})
	got := events(t, c,
		xlog(1, typedRelationMsg(1, "t", 'f',
			column{name: "id", oid: pgtype.Int8OID, key: true},
			column{name: "n", oid: pgtype.NumericOID},
			column{name: "j", oid: pgtype.JSONBOID},
			column{name: "at", oid: pgtype.TimestamptzOID},
			column{name: "tags", oid: pgtype.TextArrayOID},
			column{name: "e", oid: 99999},
			column{name: "blob", oid: pgtype.TextOID},
			column{name: "note", oid: pgtype.TextOID},
			column{name: "ok", oid: pgtype.BoolOID},
		)),
		xlog(1, beginMsg(0x20, 1)),
		xlog(1, updateFullMsg(1,
			[]any{"7", "1.50", `{"a": 1}`, "2026-01-02 03:04:05+00", "{x,y}", "red", "big", nil, "t"},
			"7", "1.50", `{"a": 1}`, "2026-01-02 03:04:05+00", "{x,y}", "red", byte('u'), nil, "f")),
		xlog(1, commitMsg(0x20)),
	)
	if len(got) != 1 {
		t.Fatalf("got %d events, want 1", len(got))
	}
	ev := got[0]
	var vals []any
	for i := range ev.New.Len() {
		v, err := ev.New.Value(i)
		if err != nil {
			t.Fatalf("Value(%d) = %v", i, err)
		}
		vals = append(vals, v)
	}
	n := pgtype.Numeric{}
	if err := n.Scan("1.50"); err != nil {
		t.Fatal(err)
	}
	want := []any{int64(7), n, map[string]any{"a": float64(1)}, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), []any{"x", "y"}, "red", "big", nil, false}
	opts := cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })
	if diff := cmp.Diff(want, vals, opts, cmp.Comparer(func(a, b pgtype.Numeric) bool {
		x, _ := a.Value()
		y, _ := b.Value()
		return x == y
	})); diff != "" {
		t.Fatalf("values (-want +got):\n%s", diff)
	}
	if oid, mod := ev.New.Type(1); oid != pgtype.NumericOID || mod != -1 {
		t.Fatalf("Type(1) = %d, %d; want %d, -1", oid, mod, pgtype.NumericOID)
	}
	if !ev.New.Key(0) || ev.New.Key(1) {
		t.Fatalf("Key(0), Key(1) = %t, %t; want true, false", ev.New.Key(0), ev.New.Key(1))
	}
	j, err := ev.New.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	wantJSON := `{"id":7,"n":"1.50","j":{"a": 1},"at":"2026-01-02 03:04:05+00","tags":"{x,y}","e":"red","blob":"big","note":null,"ok":false}`
	if string(j) != wantJSON {
		t.Fatalf("MarshalJSON = %s, want %s", j, wantJSON)
	}
}

func TestTupleUnchanged(t *testing.T) {
	c := testConn(Cursor{})
	got := events(t, c,
		xlog(1, typedRelationMsg(1, "t", 'd', column{name: "id", oid: pgtype.Int4OID, key: true}, column{name: "blob", oid: pgtype.TextOID})),
		xlog(1, beginMsg(0x20, 1)),
		xlog(1, updateMsg(1, []any{"1", nil}, "2", byte('u'))),
		xlog(1, deleteMsg(1, "2", nil)),
		xlog(1, commitMsg(0x20)),
	)
	v, err := got[0].New.Value(1)
	if err != nil || v != (Unchanged{}) {
		t.Fatalf("Value(1) = %v, %v; want Unchanged", v, err)
	}
	for _, tt := range []struct {
		name string
		tup  Tuple
		want string
	}{
		{name: "new", tup: got[0].New, want: `{"id":2,"blob":{"unchanged":true}}`},
		{name: "old key", tup: got[0].Old, want: `{"id":1}`},
		{name: "deleted key", tup: got[1].Old, want: `{"id":2}`},
	} {
		j, err := tt.tup.MarshalJSON()
		if err != nil || string(j) != tt.want {
			t.Errorf("%s: MarshalJSON = %s, %v; want %s", tt.name, j, err, tt.want)
		}
	}
}
