module github.com/resumable-go/resumable/examples/redis

go 1.26.0

replace (
	github.com/resumable-go/resumable => ../..
	github.com/resumable-go/resumable/adapters/redis => ../../adapters/redis
	github.com/resumable-go/resumable/internal/testkit => ../../internal/testkit
)

require (
	github.com/redis/go-redis/v9 v9.23.0
	github.com/resumable-go/resumable v0.1.0
	github.com/resumable-go/resumable/adapters/redis v0.1.0
	github.com/resumable-go/resumable/internal/testkit v0.1.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.uber.org/multierr v1.10.0 // indirect
	go.uber.org/zap v1.28.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
