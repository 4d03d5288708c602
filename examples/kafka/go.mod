module github.com/resumable-go/resumable/examples/kafka

go 1.26.0

replace github.com/resumable-go/resumable => ../..

replace github.com/resumable-go/resumable/adapters/kafka => ../../adapters/kafka

require (
	github.com/resumable-go/resumable v0.1.0
	github.com/resumable-go/resumable/adapters/kafka v0.0.0-00010101000000-000000000000
	github.com/twmb/franz-go v1.22.3
	github.com/twmb/franz-go/pkg/kadm v1.20.0
	github.com/twmb/franz-go/pkg/kfake v0.0.0-20260918054303-01f206a7e32c
	go.uber.org/goleak v1.3.0
)

require (
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	github.com/twmb/franz-go/pkg/kmsg v1.15.1 // indirect
	go.uber.org/multierr v1.10.0 // indirect
	go.uber.org/zap v1.28.0 // indirect
)
