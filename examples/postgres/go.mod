module github.com/resumable-go/resumable/examples/postgres

go 1.26.0

require (
	github.com/jackc/pgx/v5 v5.13.0
	github.com/resumable-go/resumable v0.1.0
	github.com/resumable-go/resumable/adapters/postgres v0.1.0
	github.com/resumable-go/resumable/internal/testkit v0.1.0
	go.uber.org/goleak v1.3.0
	go.uber.org/zap v1.28.0
)

require (
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/jackc/pgio v1.0.0 // indirect
	github.com/jackc/pglogrepl v0.0.0-20251213150135-2e8d0df862c1 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	go.uber.org/multierr v1.10.0 // indirect
	golang.org/x/text v0.41.0 // indirect
)

replace (
	github.com/resumable-go/resumable => ../..
	github.com/resumable-go/resumable/adapters/postgres => ../../adapters/postgres
	github.com/resumable-go/resumable/internal/testkit => ../../internal/testkit
)
