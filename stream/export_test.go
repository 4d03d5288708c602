package stream

// The Resumer's own errors, for the package's tests.
var (
	ErrNilConn         = errNilConn
	ErrCursorRegressed = errCursorRegressed
	ErrExtract         = errExtract
	ErrAlreadyRunning  = errAlreadyRunning
)
