package cdc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
)

// The pgoutput (protocol version 1) and replication-protocol messages the
// tests feed a conn, encoded as the server sends them.

func xlog(at pglogrepl.LSN, msg []byte) []byte {
	b := []byte{pglogrepl.XLogDataByteID}
	b = binary.BigEndian.AppendUint64(b, uint64(at))
	b = binary.BigEndian.AppendUint64(b, uint64(at))
	b = binary.BigEndian.AppendUint64(b, 0)
	return append(b, msg...)
}

func keepalive(end pglogrepl.LSN) []byte {
	b := []byte{pglogrepl.PrimaryKeepaliveMessageByteID}
	b = binary.BigEndian.AppendUint64(b, uint64(end))
	b = binary.BigEndian.AppendUint64(b, 0)
	return append(b, 0)
}

func relationMsg(id uint32, schema, table string, cols ...string) []byte {
	b := []byte{'R'}
	b = binary.BigEndian.AppendUint32(b, id)
	b = append(append(b, schema...), 0)
	b = append(append(b, table...), 0)
	b = append(b, 'd')
	b = binary.BigEndian.AppendUint16(b, uint16(len(cols)))
	for i, c := range cols {
		flags := byte(0)
		if i == 0 {
			flags = 1 // the first column is the key
		}
		b = append(b, flags)
		b = append(append(b, c...), 0)
		b = binary.BigEndian.AppendUint32(b, 25) // text
		b = binary.BigEndian.AppendUint32(b, 0xFFFFFFFF)
	}
	return b
}

func beginMsg(final pglogrepl.LSN, xid uint32) []byte {
	b := []byte{'B'}
	b = binary.BigEndian.AppendUint64(b, uint64(final))
	b = binary.BigEndian.AppendUint64(b, 0)
	return binary.BigEndian.AppendUint32(b, xid)
}

func commitMsg(lsn pglogrepl.LSN) []byte {
	b := []byte{'C', 0}
	b = binary.BigEndian.AppendUint64(b, uint64(lsn))
	b = binary.BigEndian.AppendUint64(b, uint64(lsn)+40)
	return binary.BigEndian.AppendUint64(b, 0)
}

// tuple encodes values; nil is NULL, "\x00u" an unchanged TOASTed value.
func tuple(values ...any) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(len(values)))
	for _, v := range values {
		switch v := v.(type) {
		case nil:
			b = append(b, 'n')
		case byte:
			b = append(b, v)
		case string:
			b = append(b, 't')
			b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
			b = append(b, v...)
		}
	}
	return b
}

func insertMsg(rel uint32, values ...any) []byte {
	b := binary.BigEndian.AppendUint32([]byte{'I'}, rel)
	return append(append(b, 'N'), tuple(values...)...)
}

func updateMsg(rel uint32, key []any, values ...any) []byte {
	b := binary.BigEndian.AppendUint32([]byte{'U'}, rel)
	if key != nil {
		b = append(append(b, 'K'), tuple(key...)...)
	}
	return append(append(b, 'N'), tuple(values...)...)
}

func deleteMsg(rel uint32, key ...any) []byte {
	b := binary.BigEndian.AppendUint32([]byte{'D'}, rel)
	return append(append(b, 'K'), tuple(key...)...)
}

func truncateMsg(rels ...uint32) []byte {
	b := binary.BigEndian.AppendUint32([]byte{'T'}, uint32(len(rels)))
	b = append(b, 0)
	for _, r := range rels {
		b = binary.BigEndian.AppendUint32(b, r)
	}
	return b
}

var testID = identity{system: "7300000000000000001", timeline: 1, slot: "s1"}

func testConn(after Cursor) *conn {
	c, err := newConn(&Source{slot: "s1", interval: time.Second}, nil, testID, after)
	if err != nil {
		panic(err)
	}
	return c
}

// feed hands msgs to c and returns a line per event delivered.
func feed(t *testing.T, c *conn, msgs ...[]byte) []string {
	t.Helper()
	var got []string
	for _, m := range msgs {
		ev, ok, err := c.handle(m)
		for err == nil {
			if ok {
				got = append(got, describe(ev))
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

func describe(ev Event) string {
	id, _ := ev.New.Get("id")
	if ev.Op == Delete {
		id, _ = ev.Old.Get("id")
	}
	return fmt.Sprintf("%s %v %s %v %d %d cursor=%v", ev.Relation, ev.Op, id, ev.LSN, ev.Index, ev.XID, ev.Cursor)
}

// tx is a transaction of five changes committed at 0/5000.
func tx() [][]byte {
	const at = 0x5000
	return [][]byte{
		xlog(at-0x100, beginMsg(at, 77)),
		xlog(at-0x100, relationMsg(16384, "public", "items", "id", "name")),
		xlog(at-0xF0, insertMsg(16384, "1", "a")),
		xlog(at-0xE0, insertMsg(16384, "2", "b")),
		xlog(at-0xD0, insertMsg(16384, "3", nil)),
		xlog(at-0xC0, updateMsg(16384, []any{"1", nil}, "10", "a2")),
		xlog(at-0xB0, deleteMsg(16384, "2", nil)),
		xlog(at, commitMsg(at)),
	}
}

func TestConnDeliversATransactionInOrder(t *testing.T) {
	got := feed(t, testConn(Cursor{}), tx()...)
	want := []string{
		"public.items INSERT 1 0/5000 0 77 cursor=0/5000 #0",
		"public.items INSERT 2 0/5000 1 77 cursor=0/5000 #1",
		"public.items INSERT 3 0/5000 2 77 cursor=0/5000 #2",
		"public.items UPDATE 10 0/5000 3 77 cursor=0/5000 #3",
		"public.items DELETE 2 0/5000 4 77 cursor=0/5000 #4",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestConnResumesInsideATransaction(t *testing.T) {
	tests := []struct {
		name  string
		after Cursor
		want  []string
	}{
		{name: "after the third change", after: Cursor{LSN: 0x5000, Index: 2}, want: []string{"UPDATE 3", "DELETE 4"}},
		{name: "after the last change", after: Cursor{LSN: 0x5000, Index: 4}},
		{name: "before the transaction", after: Cursor{LSN: 0x5000, Index: -1}, want: []string{"INSERT 0", "INSERT 1", "INSERT 2", "UPDATE 3", "DELETE 4"}},
		{name: "after an earlier transaction", after: Cursor{LSN: 0x4000, Index: 7}, want: []string{"INSERT 0", "INSERT 1", "INSERT 2", "UPDATE 3", "DELETE 4"}},
		{name: "after a later position", after: Cursor{LSN: 0x6000, Index: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, line := range feed(t, testConn(tt.after), tx()...) {
				f := strings.Fields(line)
				got = append(got, f[1]+" "+f[4])
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("after %v: delivered %q, want %q", tt.after, got, tt.want)
			}
		})
	}
}

func TestConnCursorCarriesIdentity(t *testing.T) {
	c := testConn(Cursor{})
	ev, ok, err := c.handle(nil)
	if ok || err != nil {
		t.Fatalf("handle(empty) = %v, %v, %v", ev, ok, err)
	}
	msgs := tx()
	for _, m := range msgs[:2] {
		if _, _, err := c.handle(m); err != nil {
			t.Fatal(err)
		}
	}
	// The first insert is delivered when the next change shows it does not
	// end the transaction.
	if _, ok, err := c.handle(msgs[2]); ok || err != nil {
		t.Fatalf("handle(first insert) = %v, %v; want it held", ok, err)
	}
	ev, ok, err = c.handle(msgs[3])
	if err != nil || !ok {
		t.Fatalf("handle(second insert) = %v, %v", ok, err)
	}
	want := Cursor{LSN: 0x5000, Index: 0, System: testID.system, Timeline: 1, Slot: "s1"}
	if ev.Cursor != want {
		t.Fatalf("cursor = %+v, want %+v", ev.Cursor, want)
	}
	if c, err := Extract(ev); c != want || err != nil {
		t.Fatalf("Extract = %v, %v; want %v, nil", c, err, want)
	}
}

// TestConnProgress: a keepalive becomes a Progress event only with no
// transaction in flight, beyond the slack a Store's own save writes, and
// at most once per status interval (1s here; a synctest bubble's clock).
func TestConnProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := testConn(Cursor{LSN: 0x5000, Index: 1})
		msgs := tx()
		far := pglogrepl.LSN(0x5000 + quietSlack + 0x1000)
		// Inside the resent transaction, and at or before the cursor: no progress.
		for _, m := range [][]byte{keepalive(0x4000), msgs[0], keepalive(far)} {
			if _, ok, err := c.handle(m); ok || err != nil {
				t.Fatalf("handle = %v, %v; want no event", ok, err)
			}
		}
		feed(t, c, msgs[1:]...)
		time.Sleep(time.Second)
		if _, ok, _ := c.handle(keepalive(0x5000 + quietSlack)); ok {
			t.Fatal("a keepalive within the slack of the last event made a progress event")
		}
		ev, ok, err := c.handle(keepalive(far))
		if err != nil || !ok {
			t.Fatalf("handle(keepalive after commit) = %v, %v", ok, err)
		}
		want := Cursor{LSN: far, Index: -1, System: testID.system, Timeline: 1, Slot: "s1"}
		if ev.Op != Progress || ev.Cursor != want {
			t.Fatalf("event = %v %+v, want PROGRESS %+v", ev.Op, ev.Cursor, want)
		}
		if _, err := Extract(ev); !errors.Is(err, cursor.ProgressOnly) {
			t.Fatalf("Extract(progress) error = %v, want ProgressOnly", err)
		}
		if _, ok, _ := c.handle(keepalive(far)); ok {
			t.Fatal("a second keepalive at the same position made another progress event")
		}
		further := far + quietSlack + 1
		if _, ok, _ := c.handle(keepalive(further)); ok {
			t.Fatal("a second progress event within the status interval")
		}
		time.Sleep(time.Second)
		if _, ok, _ := c.handle(keepalive(further)); !ok {
			t.Fatal("no progress event an interval later")
		}
		// A transaction committed at the progress position is still delivered.
		got := feed(t, c, xlog(further, beginMsg(further, 78)), xlog(further, insertMsg(16384, "9", "z")), xlog(further, commitMsg(further)))
		if len(got) != 1 || !strings.HasPrefix(got[0], "public.items INSERT 9 "+further.String()+" 0 78") {
			t.Fatalf("events after progress = %q", got)
		}
	})
}

func TestConnTruncate(t *testing.T) {
	c := testConn(Cursor{})
	got := feed(t, c,
		xlog(0x100, beginMsg(0x900, 5)),
		xlog(0x100, relationMsg(1, "public", "a", "id")),
		xlog(0x100, relationMsg(2, "s", "b", "id")),
		xlog(0x200, insertMsg(1, "1")),
		xlog(0x300, truncateMsg(1, 2)),
		xlog(0x900, commitMsg(0x900)),
	)
	want := []string{
		"public.a INSERT 1 0/900 0 5 cursor=0/900 #0",
		"public.a TRUNCATE  0/900 1 5 cursor=0/900 #1",
		"s.b TRUNCATE  0/900 2 5 cursor=0/900 #2",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestConnProtocolErrors(t *testing.T) {
	tests := []struct {
		name string
		msgs [][]byte
		want string
	}{
		{name: "commit without begin", msgs: [][]byte{xlog(1, commitMsg(0x10))}, want: "a Commit at 0/10 outside"},
		{name: "commit of another transaction", msgs: [][]byte{xlog(1, beginMsg(0x20, 1)), xlog(1, commitMsg(0x10))}, want: "a Commit at 0/10 outside transaction 0/20"},
		{name: "begin inside a transaction", msgs: [][]byte{xlog(1, beginMsg(0x20, 1)), xlog(1, beginMsg(0x30, 2))}, want: "a Begin inside"},
		{name: "change outside a transaction", msgs: [][]byte{xlog(1, relationMsg(1, "p", "t", "id")), xlog(1, insertMsg(1, "1"))}, want: "a INSERT outside"},
		{name: "unknown relation", msgs: [][]byte{xlog(1, beginMsg(0x20, 1)), xlog(1, insertMsg(9, "1"))}, want: "relation 9"},
		{name: "short keepalive", msgs: [][]byte{{pglogrepl.PrimaryKeepaliveMessageByteID, 1}}, want: "PrimaryKeepaliveMessage"},
		{name: "short xlog", msgs: [][]byte{{pglogrepl.XLogDataByteID, 1}}, want: "XLogData"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testConn(Cursor{})
			var err error
			for _, m := range tt.msgs {
				if _, _, err = c.handle(m); err != nil {
					break
				}
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("handle = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestTuple(t *testing.T) {
	c := testConn(Cursor{})
	msgs := [][]byte{
		xlog(1, relationMsg(1, "p", "t", "id", "note", "blob")),
		xlog(1, beginMsg(0x20, 1)),
		xlog(1, updateMsg(1, nil, "1", nil, byte('u'))),
		xlog(1, commitMsg(0x20)),
	}
	var ev Event
	for _, m := range msgs {
		e, ok, err := c.handle(m)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			ev = e
		}
	}
	if ev.Old.Len() != 0 {
		t.Fatalf("Old.Len() = %d, want 0 (no old tuple sent)", ev.Old.Len())
	}
	if n := ev.New.Len(); n != 3 {
		t.Fatalf("New.Len() = %d, want 3", n)
	}
	tests := []struct {
		name   string
		column string
		value  string
		ok     bool
	}{
		{name: "text", column: "id", value: "1", ok: true},
		{name: "null", column: "note"},
		{name: "unchanged toast", column: "blob"},
		{name: "absent", column: "nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, ok := ev.New.Get(tt.column)
			if string(v) != tt.value || ok != tt.ok {
				t.Fatalf("Get(%q) = %q, %t; want %q, %t", tt.column, v, ok, tt.value, tt.ok)
			}
		})
	}
	for i, want := range []struct {
		name string
		kind byte
	}{{"id", 't'}, {"note", 'n'}, {"blob", 'u'}} {
		if name, _, kind := ev.New.Column(i); name != want.name || kind != want.kind {
			t.Errorf("Column(%d) = %q, %q; want %q, %q", i, name, kind, want.name, want.kind)
		}
	}
}

func TestAppendStatus(t *testing.T) {
	now := pgEpoch.Add(3 * time.Second)
	tests := []struct {
		name                string
		write, flush        pglogrepl.LSN
		wantWrite, wantFlsh pglogrepl.LSN
	}{
		{name: "nothing saved confirms nothing", write: 0x9000, flush: 0, wantWrite: 0, wantFlsh: 0},
		{name: "saved behind received", write: 0x9000, flush: 0x5000, wantWrite: 0x9000, wantFlsh: 0x5000},
		{name: "saved ahead of received", write: 0x100, flush: 0x5000, wantWrite: 0x5000, wantFlsh: 0x5000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := appendStatus(nil, tt.write, tt.flush, now)
			if len(b) != 39 || b[0] != 'd' || binary.BigEndian.Uint32(b[1:]) != 38 || b[5] != 'r' {
				t.Fatalf("message header % x", b[:6])
			}
			w, f, a := binary.BigEndian.Uint64(b[6:]), binary.BigEndian.Uint64(b[14:]), binary.BigEndian.Uint64(b[22:])
			if pglogrepl.LSN(w) != tt.wantWrite || pglogrepl.LSN(f) != tt.wantFlsh || a != f {
				t.Fatalf("write, flush, apply = %v, %v, %v; want %v, %v, %v", pglogrepl.LSN(w), pglogrepl.LSN(f), pglogrepl.LSN(a), tt.wantWrite, tt.wantFlsh, tt.wantFlsh)
			}
			if us := binary.BigEndian.Uint64(b[30:]); us != 3_000_000 || b[38] != 0 {
				t.Fatalf("time %d µs, reply %d; want 3000000, 0", us, b[38])
			}
		})
	}
}

func TestIdentityCheck(t *testing.T) {
	tests := []struct {
		name  string
		after Cursor
		want  string // "" for no error
	}{
		{name: "fresh", after: Cursor{}},
		{name: "no identity yet", after: Cursor{LSN: 0x10, Index: 3}},
		{name: "same", after: Cursor{LSN: 0x10, System: testID.system, Timeline: 1, Slot: "s1"}},
		{name: "other system", after: Cursor{LSN: 0x10, System: "42", Timeline: 1, Slot: "s1"}, want: "system identifier: was 42, now 7300000000000000001"},
		{name: "other timeline", after: Cursor{LSN: 0x10, System: testID.system, Timeline: 2, Slot: "s1"}, want: "timeline: was 2, now 1"},
		{name: "other slot", after: Cursor{LSN: 0x10, System: testID.system, Timeline: 1, Slot: "s0"}, want: `slot: was "s0", now "s1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkChanged(t, testID.check(tt.after), tt.want)
		})
	}
}

func TestSlotCheck(t *testing.T) {
	good := slotState{plugin: "pgoutput", kind: "logical", database: "db", confirmed: 0x5000}
	tests := []struct {
		name      string
		st        slotState
		after     Cursor
		want      string
		permanent bool
	}{
		{name: "fresh stream on an old slot", st: good, after: Cursor{}},
		{name: "cursor at the confirmed position", st: good, after: Cursor{LSN: 0x5000, Index: 2}},
		{name: "cursor beyond the confirmed position", st: good, after: Cursor{LSN: 0x6000, Index: -1}},
		{name: "slot beyond the cursor", st: good, after: Cursor{LSN: 0x4FFF, Index: 0}, want: "confirmed_flush_lsn was at most 0/4FFF (cursor 0/4FFF #0), now 0/5000"},
		{name: "lost", st: slotState{plugin: "pgoutput", kind: "logical", database: "db", walStatus: "lost", confirmed: 0x10}, after: Cursor{LSN: 0x5000}, want: "now invalidated (wal_status lost"},
		{name: "lost, fresh stream", st: slotState{plugin: "pgoutput", kind: "logical", database: "db", walStatus: "lost"}, want: "now invalidated (wal_status lost"},
		{name: "conflicting", st: slotState{plugin: "pgoutput", kind: "logical", database: "db", walStatus: "lost", conflicting: true}, want: "now invalidated (conflicting with recovery"},
		{name: "invalidation reason", st: slotState{plugin: "pgoutput", kind: "logical", database: "db", walStatus: "lost", invalidation: "idle_timeout"}, want: "now invalidated (invalidation_reason idle_timeout)"},
		{name: "other plugin", st: slotState{plugin: "wal2json", kind: "logical", database: "db"}, want: "plugin", permanent: true},
		{name: "physical", st: slotState{kind: "physical"}, want: "physical", permanent: true},
		{name: "other database", st: slotState{plugin: "pgoutput", kind: "logical", database: "x"}, want: `database "x"`, permanent: true},
		{name: "temporary", st: slotState{plugin: "pgoutput", kind: "logical", database: "db", temporary: true}, want: "temporary true", permanent: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.st.usable("s1", "db")
			if err == nil {
				err = tt.st.valid("s1", tt.after)
			}
			if err == nil {
				err = tt.st.check("s1", tt.after)
			}
			if tt.permanent {
				if err == nil || !strings.Contains(err.Error(), tt.want) || errclass.Default().Classify(err).Action != errclass.Fail {
					t.Fatalf("check = %v, want a permanent error containing %q", err, tt.want)
				}
				return
			}
			checkChanged(t, err, tt.want)
		})
	}
}

// checkChanged checks that err is nil when want is empty, and otherwise an
// ErrSourceChanged whose message contains want.
func checkChanged(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("check = %v, want nil", err)
		}
		return
	}
	if !errors.Is(err, stream.ErrSourceChanged) || !strings.Contains(err.Error(), want) {
		t.Fatalf("check = %v, want ErrSourceChanged containing %q", err, want)
	}
	if d := errclass.Default().Classify(err); d.Action != errclass.Expired {
		t.Fatalf("Default().Classify(%v) = %v, want Expired", err, d)
	}
}

func TestOpString(t *testing.T) {
	for op, want := range map[Op]string{Insert: "INSERT", Update: "UPDATE", Delete: "DELETE", Truncate: "TRUNCATE",
		Progress: "PROGRESS", ResyncStart: "RESYNC-START", Snapshot: "SNAPSHOT", ResyncEnd: "RESYNC-END", 0: "OP(0)", 42: "OP(42)"} {
		if got := op.String(); got != want {
			t.Errorf("Op(%d).String() = %q, want %q", op, got, want)
		}
	}
}

func TestCursorJSON(t *testing.T) {
	codec := cursor.JSON[Cursor]()
	c := Cursor{LSN: 0x16B3748, Index: -1, System: testID.system, Timeline: 3, Slot: "s1"}
	data, err := codec.Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"lsn":"0/16B3748","index":-1,"system":"7300000000000000001","timeline":3,"slot":"s1"}
`
	if string(data) != want {
		t.Fatalf("Encode = %s, want %s", data, want)
	}
	if got, err := codec.Decode(data); got != c || err != nil {
		t.Fatalf("Decode = %+v, %v; want %+v", got, err, c)
	}
	// As earlier versions stored it: the LSN a number.
	old := `{"lsn":23803720,"index":-1,"system":"7300000000000000001","timeline":3,"slot":"s1"}`
	if got, err := codec.Decode([]byte(old)); got != c || err != nil {
		t.Fatalf("Decode(%s) = %+v, %v; want %+v", old, got, err, c)
	}
	for _, bad := range []string{`{"lsn":"x/y"}`, `{"lsn":-1}`, `{"lsn":true}`} {
		if got, err := codec.Decode([]byte(bad)); err == nil {
			t.Fatalf("Decode(%s) = %+v, want an error", bad, got)
		}
	}
	if err := (Cursor{Index: -3}).validate(); err == nil {
		t.Fatal("validate(index -3) = nil, want an error")
	}
	if err := (Cursor{Index: replayIndex}).validate(); err != nil {
		t.Fatalf("validate(index -2, a resync's replay) = %v, want nil", err)
	}
}
