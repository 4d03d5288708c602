package stream

// The Resumer's own errors, for the package's tests.
var (
	ErrNilConn        = errNilConn
	ErrExtract        = errExtract
	ErrAlreadyRunning = errAlreadyRunning
)
