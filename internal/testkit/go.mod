// Module testkit is the harness of our own tests: child processes (the real
// servers integration tests start) and free loopback ports. It is a module
// of its own so that none of it ships in the published root module, and its
// path is under internal/ so that only this repository's modules can import
// it. Nested modules require it with a replace; the root module never does.
module github.com/resumable-go/resumable/internal/testkit

go 1.26.0

require (
	github.com/jackc/pgx/v5 v5.13.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	golang.org/x/text v0.41.0 // indirect
)
