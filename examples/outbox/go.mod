module github.com/resumable-go/resumable/examples/outbox

go 1.26.0

require (
	github.com/jackc/pgx/v5 v5.13.0
	github.com/redis/go-redis/v9 v9.23.0
	github.com/resumable-go/resumable v0.1.0
	github.com/resumable-go/resumable/adapters/postgres v0.1.0
	github.com/resumable-go/resumable/adapters/redis v0.1.0
	github.com/resumable-go/resumable/internal/testkit v0.1.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.uber.org/multierr v1.10.0 // indirect
	go.uber.org/zap v1.28.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.41.0 // indirect
)

replace (
	github.com/resumable-go/resumable => ../..
	github.com/resumable-go/resumable/adapters/postgres => ../../adapters/postgres
	github.com/resumable-go/resumable/adapters/redis => ../../adapters/redis
	github.com/resumable-go/resumable/internal/testkit => ../../internal/testkit
)
