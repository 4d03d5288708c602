module github.com/resumable-go/resumable/examples/postgres

go 1.26.0

require (
	github.com/resumable-go/resumable v0.0.0
	github.com/resumable-go/resumable/adapters/postgres v0.0.0
)

replace (
	github.com/resumable-go/resumable => ../..
	github.com/resumable-go/resumable/adapters/postgres => ../../adapters/postgres
)
