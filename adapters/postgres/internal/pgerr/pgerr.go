// Package pgerr holds the error the two packages of adapters/postgres
// share.
package pgerr

import "github.com/resumable-go/resumable/stream"

// ErrInvalid is postgres.ErrInvalid and cdc.ErrInvalid: the error a
// constructor's failure for a bad argument or option matches. It matches
// stream.ErrInvalidOption too.
var ErrInvalid error = &invalid{}

type invalid struct{}

func (*invalid) Error() string { return "postgres: invalid argument" }

// Is makes the error match stream.ErrInvalidOption.
func (*invalid) Is(target error) bool { return target == stream.ErrInvalidOption }
