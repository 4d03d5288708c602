package sse

// The errors of bad events, for the package's tests.
var (
	ErrUnsendableID = errUnsendableID
)
