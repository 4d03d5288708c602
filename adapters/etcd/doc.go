// Package etcd is resumable's adapter for etcd: a [stream.Source] over a
// watch of a key prefix, a [cursor.Store] that keeps a cursor in an etcd
// key, and a [Group] that runs named streams across processes with one
// owner per stream, fenced by an etcd lease and election.
package etcd
