//go:build !race

package k8s_test

// raceEnabled: the race detector's instrumentation deepens every frame.
const raceEnabled = false
