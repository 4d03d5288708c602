// Package pgsql holds the small helpers adapters/postgres and its outbox
// package share: table names, SQLSTATE checks, closing a connection.
package pgsql

import (
	"context"
	"errors"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Identifier is one part of a table name the adapters accept: an unquoted
// SQL identifier, case kept (the name is quoted in every statement).
var Identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// SplitTable returns the parts of table, a name or schema.name, each part
// matching Identifier; nil for anything else.
func SplitTable(table string) []string {
	var parts []string
	start := 0
	for i := 0; i <= len(table); i++ {
		if i == len(table) || table[i] == '.' {
			parts = append(parts, table[start:i])
			start = i + 1
		}
	}
	if len(parts) > 2 {
		return nil
	}
	for _, p := range parts {
		if !Identifier.MatchString(p) {
			return nil
		}
	}
	return parts
}

// IsCode reports whether err is a PostgreSQL error with SQLSTATE code.
func IsCode(err error, code string) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == code
}

// CloseTimeout bounds a rollback or a connection's close; a server that
// does not answer within it has its connection dropped.
const CloseTimeout = 5 * time.Second

// CloseConn closes pg within CloseTimeout.
func CloseConn(pg *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), CloseTimeout)
	defer cancel()
	pg.Close(ctx)
}
