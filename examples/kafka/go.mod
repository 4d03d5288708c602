module github.com/resumable-go/resumable/examples/kafka

go 1.26.0

replace github.com/resumable-go/resumable => ../..

replace github.com/resumable-go/resumable/adapters/kafka => ../../adapters/kafka
