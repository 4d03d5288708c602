module github.com/resumable-go/resumable/adapters/sse/interop

go 1.26.0

replace github.com/resumable-go/resumable => ../../..

require (
	github.com/r3labs/sse/v2 v2.10.0
	github.com/resumable-go/resumable v0.1.0
	github.com/tmaxmax/go-sse v0.12.0
	go.uber.org/goleak v1.3.0
	gopkg.in/cenkalti/backoff.v1 v1.1.0
)

require (
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	go.uber.org/multierr v1.10.0 // indirect
	go.uber.org/zap v1.28.0 // indirect
	golang.org/x/net v0.0.0-20191116160921-f9c825593386 // indirect
)
