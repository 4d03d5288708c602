package k8s

// The error types, for the external tests to inspect.
type (
	EventError        = eventError
	InvalidEventError = invalidEventError
)

// Unexported constants the external tests check against.
const (
	DefaultMinRestartDelay = defaultMinRestartDelay
	ResyncAnnotation       = resyncAnnotation
	ResyncEndAnnotation    = resyncEndAnnotation
)
