# Aster: everything a newcomer or CI needs, with only Go and make installed.

GO          ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
BENCHSTAT   ?= golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
PKGS        ?= ./...

.PHONY: run test lint cover bench chaos tidy

## run: the main demo (embedded NATS, three instances, kill/pause/stop the leader); exits by itself.
##      Flags go in ARGS, e.g. make run ARGS="-ttl 3s -instances 4", or ARGS=-help.
run:
	$(GO) run ./examples/outbox $(ARGS)

## test: vet, then every test with the race detector (the CI command)
test:
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 $(PKGS)
	cd chaos && $(GO) vet ./... && $(GO) test -race -count=1 -short ./...

## lint: gofmt, go vet and staticcheck (fetched at a pinned version)
lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run $(STATICCHECK) $(PKGS)

## cover: test coverage per package, and an HTML report in cover.html
cover:
	$(GO) test -race -count=1 -coverprofile=cover.out $(PKGS)
	$(GO) tool cover -func=cover.out | tail -1
	$(GO) tool cover -html=cover.out -o cover.html

## bench: Go benchmarks, 6 runs each, summarised by benchstat
bench:
	$(GO) test -run='^$$' -bench=. -benchmem -count=6 $(PKGS) | tee bench.out
	$(GO) run $(BENCHSTAT) bench.out

## chaos: the full fault-injection suite (module chaos/); regenerates docs/reliability.md
chaos:
	cd chaos && $(GO) test -race -count=1 -timeout 60m ./scenario -chaos.full -chaos.report ../../docs/reliability.md

tidy:
	$(GO) mod tidy
