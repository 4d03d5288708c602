module github.com/resumable-go/resumable/adapters/k8s

go 1.26.0

require github.com/resumable-go/resumable v0.0.0

require (
	go.uber.org/multierr v1.10.0 // indirect
	go.uber.org/zap v1.28.0 // indirect
	k8s.io/api v0.37.2 // indirect
	k8s.io/apimachinery v0.37.2 // indirect
	k8s.io/client-go v0.37.2 // indirect
)

replace github.com/resumable-go/resumable => ../..
