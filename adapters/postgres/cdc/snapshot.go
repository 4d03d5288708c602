package cdc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/resumable-go/resumable/errclass"
)

// defaultChunkRows is the number of rows a snapshot chunk reads unless told
// otherwise.
const defaultChunkRows = 10000

// maxChunkRetry bounds the pause before a chunk refused for a concurrent
// commit is read again.
const maxChunkRetry = time.Second

// WithSnapshot makes a stream's first start (a zero cursor) deliver every
// row of every table the publication publishes, as [Snapshot] events, then
// the changes committed since. A slot it creates exports its snapshot, and
// the rows are read as of the slot's start, in key order, chunkRows at a
// time (10000 when chunkRows is 0; a negative value makes NewSource fail).
// Killed half-way, or with a slot that existed, the snapshot resumes from
// its cursor's key in chunks interleaved with the changes, where a chunk
// row that a delivered change is newer than is never delivered after it:
// applied as upserts, snapshot rows and changes end equal to the tables.
// Every published table needs a primary key or a replica identity index.
// See docs/postgres.md for how it works and what it costs.
func WithSnapshot(chunkRows int) SourceOption {
	return sourceOption(func(s *Source) {
		s.snapshot = true
		switch {
		case chunkRows < 0:
			s.optErrs = append(s.optErrs, invalid("cdc: WithSnapshot", "chunkRows", chunkRows, "must not be negative"))
		case chunkRows > 0:
			s.chunkRows = chunkRows
		}
	})
}

// Backfill asks the stream to read table (schema.name, or a name the
// search path finds, quoted as SQL quotes identifiers) again, in key chunks
// interleaved with its changes, as [Snapshot] events, as [WithSnapshot]
// does: to deliver the earlier rows of a table added to the publication,
// or to repair a consumer. The slot is neither dropped nor paused. The
// request is kept by the Source until the stream's Store holds a cursor
// taken after it, and from then by the cursors, so the backfill resumes
// after a crash; a process that dies before must ask again.
//
// It checks the table on a connection of its own and returns an error when
// it does not exist, is not published by the Source's publication, or has
// neither a primary key nor a replica identity index (an error matching
// [ErrInvalid] for the last two).
func (s *Source) Backfill(ctx context.Context, table string) error {
	pg, err := pgconn.ConnectConfig(ctx, s.queryConfig())
	if err != nil {
		return classify(fmt.Errorf("cdc: Backfill: connecting: %w", err))
	}
	defer closeQuietly(ctx, pg)
	name, err := resolveTable(ctx, pg, table)
	if err != nil {
		return fmt.Errorf("cdc: Backfill: %w", err)
	}
	if _, err := s.describe(ctx, pg, name); err != nil {
		return fmt.Errorf("cdc: Backfill: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.requests {
		if r.table == name {
			return nil
		}
	}
	s.requests = append(s.requests, request{table: name})
	s.pending.Store(int32(len(s.requests)))
	return nil
}

// request is a backfill asked for: taken is set when a connection added
// it to its progress, since the position of its last event then.
type request struct {
	table tableName
	taken bool
	since Cursor
}

// tableName is a table's schema and name.
type tableName [2]string

func (t tableName) String() string { return t[0] + "." + t[1] }

// quoted returns the table's name quoted for SQL.
func (t tableName) quoted() string { return quoteIdent(t[0]) + "." + quoteIdent(t[1]) }

// progress is the state of the snapshot and the backfills of a stream, as a
// Cursor's Snapshot holds it (JSON): the tables left, the first being read,
// and the key of the last row delivered of it.
//
// The first Listed tables are the publication's, in the order
// publishedTables lists them: a cursor names only the first of them
// ("p"), the others being the published tables listed after it, listed
// again after a restart (expand); the tables after them (backfills) are
// named each ("t"). So a cursor stays small whatever the number of
// tables: every row's cursor carries its progress. A cursor that names
// every table ("t" alone, as earlier versions wrote) is read as well.
type progress struct {
	Tables []tableName // tables to read; the first is being read
	After  []string    // key of the last row delivered of Tables[0]; none: from the first
	Listed int         // how many of Tables, from the first, are the publication's
	expand bool        // read from a cursor: the publication's tables after Tables[0] are still to be listed
}

// encode returns p as a Cursor's Snapshot: empty when nothing is left.
func (p progress) encode() string {
	if len(p.Tables) == 0 {
		return ""
	}
	// As json.Marshal writes it, without its reflection: once per row.
	b := make([]byte, 0, 64)
	b = append(b, '{')
	named := p.Tables
	if p.Listed > 0 {
		b = append(b, `"p":`...)
		b = appendTable(b, p.Tables[0])
		named = p.Tables[p.Listed:]
	}
	if len(named) > 0 {
		if p.Listed > 0 {
			b = append(b, ',')
		}
		b = append(b, `"t":[`...)
		for i, t := range named {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendTable(b, t)
		}
		b = append(b, ']')
	}
	if len(p.After) > 0 {
		b = append(b, `,"k":[`...)
		for i, k := range p.After {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONText(b, k)
		}
		b = append(b, ']')
	}
	return string(append(b, '}'))
}

// appendTable appends t as a JSON array of its schema and name.
func appendTable(b []byte, t tableName) []byte {
	b = append(b, '[')
	b = appendJSONText(b, t[0])
	b = append(b, ',')
	b = appendJSONText(b, t[1])
	return append(b, ']')
}

// expanded returns p with the tables of listed (the publication's, in
// order) that follow its first table inserted after it, when p was read
// from a cursor that named only the first.
func (p progress) expanded(listed []tableName) progress {
	if !p.expand {
		return p
	}
	tables := []tableName{p.Tables[0]}
	for _, t := range listed {
		if cmpTable(t, p.Tables[0]) > 0 && !slices.Contains(p.Tables, t) {
			tables = append(tables, t)
		}
	}
	p.Listed = len(tables)
	p.Tables = append(tables, p.Tables[1:]...)
	p.expand = false
	return p
}

// cmpTable orders table names as publishedTables lists them: by schema,
// then name, byte by byte (the collation of the type name).
func cmpTable(a, b tableName) int {
	if c := strings.Compare(a[0], b[0]); c != 0 {
		return c
	}
	return strings.Compare(a[1], b[1])
}

// prefix returns the encoding of p up to its key's first value: a key is
// appended to it by progressAt.
func (p progress) prefix() string {
	q := p
	q.After = []string{""}
	s := q.encode()
	return s[:len(s)-len(`""]}`)]
}

// appendJSONText appends s as a JSON string.
func appendJSONText[S ~string | ~[]byte](b []byte, s S) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// decodeProgress reads a Cursor's Snapshot.
func decodeProgress(s string) (progress, error) {
	var p progress
	if s == "" {
		return p, nil
	}
	var wire struct {
		First  *tableName  `json:"p"`
		Tables []tableName `json:"t"`
		After  []string    `json:"k"`
	}
	if err := json.Unmarshal([]byte(s), &wire); err != nil {
		return p, fmt.Errorf("cdc: cursor's snapshot progress %q: %w", s, err)
	}
	p.Tables, p.After = wire.Tables, wire.After
	if wire.First != nil {
		p.Tables = append([]tableName{*wire.First}, wire.Tables...)
		p.Listed, p.expand = 1, true
	}
	return p, nil
}

// has reports whether t is still to be read.
func (p progress) has(t tableName) bool { return slices.Contains(p.Tables, t) }

// table is what a chunk needs to know of a table.
type table struct {
	name   tableName
	cols   []string // the published columns, in order
	filter string   // the publication's row filter (SQL); empty: none
	keys   []string // the key columns, in key order
	keyIdx []int    // the positions of the key columns among cols
	rel    *relation
}

// chunk is a chunk of rows read at a snapshot S and waiting for the
// stream to reach its watermark W, emitted just after S was taken. Until
// then every change of the table by a transaction S does not see drops
// the row of its key; at W every transaction S sees has been delivered, so
// the rows left are no older than anything delivered for their keys.
type chunk struct {
	tab   *table
	rows  [][]byte       // packed (see packedCol); nil: dropped
	texts string         // the progress after each of rows, encoded, one after the other
	ends  []int          // where each row's progress ends in texts
	keyAt map[string]int // key (see keyOf) → row; nil until a change of the table needs it
	last  []string       // key of the last row read
	more  bool           // the chunk was full: rows may follow
	redo  bool           // a change of an unknown key: read the chunk again

	xmax uint32   // S's xmax: xids from it are not seen by S
	xip  []uint32 // the xids S sees as running

	mark    string // the watermark's content
	reached bool   // the stream reached the watermark
	at      Cursor // the watermark's position
	next    int    // the next row to deliver
}

// sees reports whether snapshot S sees the effects of transaction xid
// (which committed).
func (k *chunk) sees(xid uint32) bool {
	return int32(xid-k.xmax) < 0 && !slices.Contains(k.xip, xid)
}

// queryConfig returns the configuration of a plain (not replication)
// connection to the Source's database.
func (s *Source) queryConfig() *pgconn.Config {
	cfg := s.cfg.Copy()
	delete(cfg.RuntimeParams, "replication")
	return cfg
}

// closeQuietly closes pg, bounded by closeTimeout.
func closeQuietly(ctx context.Context, pg *pgconn.PgConn) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	_ = pg.Close(cctx)
}

// query runs sql on pg, each $n in it replaced by params[n-1] as an SQL
// string constant, by the simple protocol (a replication connection speaks
// no other), and returns the rows of its last statement.
func query(ctx context.Context, pg *pgconn.PgConn, sql string, params ...string) ([][][]byte, error) {
	if len(params) > 0 {
		var b strings.Builder
		for i := 0; i < len(sql); i++ {
			j := i + 1
			for j < len(sql) && sql[j] >= '0' && sql[j] <= '9' {
				j++
			}
			n, err := strconv.Atoi(sql[i+1 : j])
			if sql[i] != '$' || err != nil || n < 1 || n > len(params) {
				b.WriteByte(sql[i])
				continue
			}
			b.WriteString(quoteLiteral(params[n-1]))
			i = j - 1
		}
		sql = b.String()
	}
	res, err := pg.Exec(ctx, sql).ReadAll()
	if err != nil || len(res) == 0 {
		return nil, err
	}
	return res[len(res)-1].Rows, nil
}

// resolveTable finds the table name names.
func resolveTable(ctx context.Context, pg *pgconn.PgConn, name string) (tableName, error) {
	rows, err := query(ctx, pg, "SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1::regclass", name)
	if err != nil {
		return tableName{}, classify(fmt.Errorf("table %q: %w", name, err))
	}
	if len(rows) != 1 {
		return tableName{}, errclass.Permanent(fmt.Errorf("table %q: not found", name))
	}
	return tableName{string(rows[0][0]), string(rows[0][1])}, nil
}

// errNoTable is the failure of describe for a table that no longer exists.
var errNoTable = errors.New("cdc: no such table")

// errNotPublished is the failure of describe for a table the publication
// does not publish (any longer).
var errNotPublished = fmt.Errorf("not published: %w", ErrInvalid)

// describe reads what a chunk needs to know of t: its published columns,
// its row filter and its key, the key columns of its replica identity
// index (not the columns an INCLUDE adds). It fails with an error matching
// ErrInvalid when t is not published or has no key, and errNoTable when it
// is gone.
func (s *Source) describe(ctx context.Context, pg *pgconn.PgConn, t tableName) (*table, error) {
	tab, err := s.published(ctx, pg, t)
	if err != nil {
		return nil, err
	}
	if len(tab.keys) == 0 {
		return nil, fmt.Errorf("table %s has no primary key or replica identity index among its published columns: %w", t, ErrInvalid)
	}
	return tab, nil
}

// published reads t as the publication publishes it, as pgoutput sends its
// rows: the columns of its column list but generated ones, its row filter,
// and its key (none when it has neither a primary key nor a replica
// identity index among those columns). It fails with an error matching
// ErrInvalid when t is not published, and errNoTable when it is gone.
func (s *Source) published(ctx context.Context, pg *pgconn.PgConn, t tableName) (*table, error) {
	rows, err := query(ctx, pg, `SELECT a.attname, a.atttypid::int8, a.atttypmod::int8,
		coalesce((SELECT k.n FROM unnest(i.indkey::int2[]) WITH ORDINALITY k(att, n) WHERE k.att = a.attnum AND k.n <= i.indnkeyatts), 0),
		coalesce(p.rowfilter, '')
	FROM pg_publication_tables p
	JOIN pg_namespace n ON n.nspname = p.schemaname
	JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = p.tablename
	JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = '' AND a.attname = ANY(p.attnames)
	LEFT JOIN LATERAL (SELECT indkey, indnkeyatts FROM pg_index WHERE indrelid = c.oid AND (indisreplident OR indisprimary) ORDER BY indisreplident DESC LIMIT 1) i ON true
	WHERE p.pubname = $1 AND p.schemaname = $2 AND p.tablename = $3
	ORDER BY a.attnum`, s.pubname(), t[0], t[1])
	if err != nil {
		return nil, classify(fmt.Errorf("describing %s: %w", t, err))
	}
	if len(rows) == 0 {
		exists, err := query(ctx, pg, "SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2", t[0], t[1])
		if err != nil {
			return nil, classify(fmt.Errorf("describing %s: %w", t, err))
		}
		if len(exists) == 0 {
			return nil, fmt.Errorf("%s: %w", t, errNoTable)
		}
		return nil, fmt.Errorf("table %s, publication %q: %w", t, s.pub, errNotPublished)
	}
	tab := &table{name: t, rel: &relation{name: t.String()}, filter: string(rows[0][4])}
	keyAt := map[int]string{}
	for _, r := range rows {
		name := string(r[0])
		oid, _ := strconv.ParseUint(string(r[1]), 10, 32)
		mod, _ := strconv.ParseInt(string(r[2]), 10, 32)
		pos, _ := strconv.Atoi(string(r[3]))
		tab.cols = append(tab.cols, name)
		tab.rel.names = append(tab.rel.names, name)
		tab.rel.oids = append(tab.rel.oids, uint32(oid))
		tab.rel.mods = append(tab.rel.mods, int32(mod))
		tab.rel.key = append(tab.rel.key, pos > 0)
		if pos > 0 {
			keyAt[pos] = name
		}
	}
	for i := 1; i <= len(keyAt); i++ {
		k, ok := keyAt[i]
		if !ok {
			break
		}
		tab.keys = append(tab.keys, k)
	}
	if len(tab.keys) != len(keyAt) { // a key column left out of the column list
		tab.keys = nil
		clear(tab.rel.key)
	}
	tab.keyIdx = tab.keyIndex()
	return tab, nil
}

// pubname returns the publication's name as the catalog holds it: the
// server folds an unquoted name to lower case, as pgoutput does with
// publication_names.
func (s *Source) pubname() string { return strings.ToLower(s.pub) }

// publishedTables lists the tables the publication publishes.
func (s *Source) publishedTables(ctx context.Context, pg *pgconn.PgConn) ([]tableName, error) {
	rows, err := query(ctx, pg, "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = $1 ORDER BY 1, 2", s.pubname())
	if err != nil {
		return nil, classify(fmt.Errorf("cdc: tables of publication %q: %w", s.pub, err))
	}
	var ts []tableName
	for _, r := range rows {
		ts = append(ts, tableName{string(r[0]), string(r[1])})
	}
	return ts, nil
}

// keyOf returns the key of a row as one string: the text of its key
// columns, each preceded by its length.
func keyOf(vals [][]byte) string {
	var room [64]byte // most keys: the string is the one allocation
	b := room[:0]
	for _, v := range vals {
		b = strconv.AppendInt(b, int64(len(v)), 10)
		b = append(b, ':')
		b = append(b, v...)
	}
	return string(b)
}
