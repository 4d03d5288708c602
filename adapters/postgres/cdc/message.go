package cdc

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/jackc/pglogrepl"
)

// WithMessages makes the Source deliver the logical decoding messages whose
// prefix is one of prefixes (every message when none is given) as
// [Message] events. An application emits one with
// SELECT pg_logical_emit_message(true, 'prefix', 'payload') inside its
// transaction: it arrives in the transaction's place among its changes, and
// only if the transaction commits, so an outbox needs no table (see
// docs/postgres.md). Messages need PostgreSQL 14 or later.
func WithMessages(prefixes ...string) SourceOption {
	return sourceOption(func(s *Source) {
		s.messages = true
		s.prefixes = append([]string(nil), prefixes...)
	})
}

// wants reports whether a message of prefix is delivered.
func (s *Source) wants(prefix string) bool {
	if !s.messages || strings.HasPrefix(prefix, watermarkPrefix) {
		return false
	}
	return len(s.prefixes) == 0 || containsString(s.prefixes, prefix)
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// watermarkPrefix begins the prefixes of the messages the Source emits for
// itself; they are never delivered.
const watermarkPrefix = "resumable.cdc"

// logicalMessage handles a logical decoding message. A transactional one
// is numbered among its transaction's changes whether it is delivered or
// not, so that positions do not depend on the prefixes asked for.
func (c *conn) logicalMessage(m *pglogrepl.LogicalDecodingMessage) (Event, bool, error) {
	if m.Transactional {
		if !c.inTx {
			return Event{}, false, c.protocolError("a transactional message outside a transaction")
		}
		c.idx++
		pos := Cursor{LSN: c.txLSN, Index: c.idx}
		if m.Prefix == watermarkPrefix {
			c.watermark(m.Content, pos)
		}
		if Compare(pos, c.skip) <= 0 || !c.src.wants(m.Prefix) {
			return Event{}, false, nil
		}
		c.last = pos
		return c.readAhead(Event{Op: Message, XID: c.xid, LSN: c.txLSN, Index: c.idx, CommitTime: c.txTime,
			Prefix: m.Prefix, Content: bytes.Clone(m.Content), Cursor: c.cursor(pos)})
	}
	if c.inTx {
		return Event{}, false, c.protocolError("a non-transactional message inside transaction %v", c.txLSN)
	}
	// The server sends a non-transactional message at the end of its
	// record (m.LSN) and, from a start position, only those whose record
	// begins at or after it: a position at its end, before every change of
	// a transaction committed there, comes after it.
	pos := Cursor{LSN: m.LSN, Index: -1}
	if Compare(pos, c.skip) <= 0 || !c.src.wants(m.Prefix) {
		return Event{}, false, nil
	}
	c.last = pos
	return Event{Op: Message, LSN: m.LSN, Index: -1, TxEnd: true,
		Prefix: m.Prefix, Content: bytes.Clone(m.Content), Cursor: c.cursor(pos)}, true, nil
}

// serverMessages reports whether the server's pgoutput takes the messages
// option (PostgreSQL 14 or later), from its server_version parameter.
func serverMessages(version string) bool {
	major, _, _ := strings.Cut(version, ".")
	major, _, _ = strings.Cut(major, " ")
	n, err := strconv.Atoi(major)
	return err == nil && n >= 14
}
