// Pins the franz-go version whose pkg/kgo integration tests run.sh builds and runs against the
// broker. This module has no code of its own: `go test -c github.com/twmb/franz-go/pkg/kgo` builds
// the tests from the Go module cache (fetched from the module proxy at the version below).
module sluice-compat/franz-go

go 1.26.0

require github.com/twmb/franz-go v1.22.3

require (
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	github.com/twmb/franz-go/pkg/kmsg v1.15.1 // indirect
)
