# make          a static, stripped openbot binary in ./openbot, with its version set
# make test     the test suite, as CI runs it
# make VERSION=1.2.3 OUT=/usr/local/bin/openbot   another version or place

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
OUT     ?= openbot

.PHONY: build test
build:
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.Version=$(VERSION)" -o $(OUT) ./cmd/openbot

test:
	go vet ./...
	go test -race ./...
