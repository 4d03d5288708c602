// Package postgres keeps a stream's cursor in PostgreSQL and reads
// PostgreSQL's logical replication as a stream.Source.
package postgres
