package cdc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgtype"
)

// Unchanged is the value [Tuple.Value] returns for a TOASTed column that an
// update left unchanged and the server did not send (with REPLICA IDENTITY
// FULL the Source fills it in from the old row instead). It is not NULL:
// the column keeps its previous value. As JSON it is {"unchanged":true}.
type Unchanged struct{}

// MarshalJSON returns {"unchanged":true}.
func (Unchanged) MarshalJSON() ([]byte, error) { return []byte(`{"unchanged":true}`), nil }

// newRelation records what a Relation message says about a table.
func newRelation(m *pglogrepl.RelationMessage) *relation {
	n := len(m.Columns)
	r := &relation{
		name:  m.Namespace + "." + m.RelationName,
		names: make([]string, n),
		oids:  make([]uint32, n),
		mods:  make([]int32, n),
		key:   make([]bool, n),
	}
	for i, col := range m.Columns {
		r.names[i], r.oids[i], r.mods[i], r.key[i] = col.Name, col.DataType, col.TypeModifier, col.Flags&1 != 0
	}
	return r
}

// fillUnchanged replaces the unchanged TOASTed values of a new row by the
// old row's values, when the old row holds them (REPLICA IDENTITY FULL).
func fillUnchanged(new, old []*pglogrepl.TupleDataColumn) {
	for i, c := range new {
		if c.DataType == pglogrepl.TupleDataTypeToast && i < len(old) &&
			(old[i].DataType == pglogrepl.TupleDataTypeText || old[i].DataType == pglogrepl.TupleDataTypeBinary) {
			new[i] = old[i]
		}
	}
}

// maps holds pgtype.Maps for decoding: a Map caches plans and is not safe
// for concurrent use, and making one is costly.
var maps = sync.Pool{New: func() any { return pgtype.NewMap() }}

// Type returns the type OID and type modifier (atttypmod, -1 for none) of
// column i (0 ≤ i < Len); 0 and -1 when the Source did not learn them.
func (t Tuple) Type(i int) (oid uint32, modifier int32) {
	if t.rel == nil || i >= len(t.rel.oids) {
		return 0, -1
	}
	return t.rel.oids[i], t.rel.mods[i]
}

// Value returns column i (0 ≤ i < Len) decoded to a Go value by its type,
// as pgx decodes a query's result: int32 or int64 for integers,
// pgtype.Numeric for numeric, time.Time for timestamps and dates, the
// unmarshalled value for json and jsonb, [16]byte for uuid, []byte for
// bytea, []any for arrays, and so on; a type pgx does not know (an enum, a
// domain of an extension) as its text, a string. NULL is nil, and an
// unchanged TOASTed value not sent (or a column outside the key of a
// key-only old tuple) is [Unchanged]. The error reports text
// the type's decoder refuses.
func (t Tuple) Value(i int) (any, error) {
	_, data, kind := t.Column(i)
	switch kind {
	case pglogrepl.TupleDataTypeNull:
		return nil, nil
	case pglogrepl.TupleDataTypeToast:
		return Unchanged{}, nil
	}
	oid, _ := t.Type(i)
	format := int16(pgtype.TextFormatCode)
	if kind == pglogrepl.TupleDataTypeBinary {
		format = pgtype.BinaryFormatCode
	}
	m := maps.Get().(*pgtype.Map)
	defer maps.Put(m)
	typ, ok := m.TypeForOID(oid)
	if !ok {
		if format == pgtype.BinaryFormatCode {
			return append([]byte(nil), data...), nil
		}
		return string(data), nil
	}
	v, err := typ.Codec.DecodeValue(m, oid, format, data)
	if err != nil {
		name, _, _ := t.Column(i)
		return nil, fmt.Errorf("cdc: decoding column %q of type %s: %w", name, typ.Name, err)
	}
	return v, nil
}

// MarshalJSON encodes the tuple as a JSON object of its columns by name:
// integers, floats and booleans as JSON numbers and booleans, json and
// jsonb as their JSON (json compacted: the whole is one line), NULL as null, an unchanged TOASTed value as
// {"unchanged":true}, and every other type (numeric, timestamps, uuid,
// arrays, ...) as a JSON string of PostgreSQL's text form, which keeps
// numeric exact. An old row holding only its replica identity (REPLICA
// IDENTITY DEFAULT or USING INDEX) has only the identity's columns.
func (t Tuple) MarshalJSON() ([]byte, error) {
	return t.appendJSON(nil)
}

// appendJSON appends the tuple encoded as MarshalJSON does to buf.
func (t Tuple) appendJSON(buf []byte) ([]byte, error) {
	buf = append(buf, '{')
	first := true
	for i := range t.Len() {
		if t.keyOnly && !t.Key(i) {
			continue // not sent: outside the replica identity
		}
		name, data, kind := t.Column(i)
		if !first {
			buf = append(buf, ',')
		}
		first = false
		buf = appendJSONString(buf, []byte(name))
		buf = append(buf, ':')
		var err error
		if buf, err = t.appendValue(buf, i, data, kind); err != nil {
			return nil, err
		}
	}
	return append(buf, '}'), nil
}

// appendValue appends the JSON of column i, whose value and kind are data
// and kind.
func (t Tuple) appendValue(buf []byte, i int, data []byte, kind byte) ([]byte, error) {
	switch kind {
	case pglogrepl.TupleDataTypeNull:
		return append(buf, "null"...), nil
	case pglogrepl.TupleDataTypeToast:
		return append(buf, `{"unchanged":true}`...), nil
	case pglogrepl.TupleDataTypeBinary:
		v, err := t.Value(i)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(v)
		return append(buf, b...), err
	}
	oid, _ := t.Type(i)
	switch oid {
	case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID, pgtype.OIDOID:
		return append(buf, data...), nil
	case pgtype.Float4OID, pgtype.Float8OID:
		if _, err := strconv.ParseFloat(string(data), 64); err == nil && json.Valid(data) {
			return append(buf, data...), nil
		}
	case pgtype.BoolOID:
		if string(data) == "t" {
			return append(buf, "true"...), nil
		}
		return append(buf, "false"...), nil
	case pgtype.JSONBOID:
		if json.Valid(data) {
			return append(buf, data...), nil
		}
	case pgtype.JSONOID: // kept as written: compacted, so that the tuple's JSON is one line
		var b bytes.Buffer
		if json.Compact(&b, data) == nil {
			return append(buf, b.Bytes()...), nil
		}
	}
	return appendJSONString(buf, data), nil
}

// appendJSONString appends s as a JSON string.
func appendJSONString(buf, s []byte) []byte {
	b, _ := json.Marshal(string(s)) // a string always marshals
	return append(buf, b...)
}
