# Aster: everything a newcomer or CI needs, with only Go and make installed.

GO          ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
BENCHSTAT   ?= golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
PKGS        ?= ./...

.PHONY: run test lint cover bench bench-report chaos tidy

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

## bench: benchmarks and failover measurements (about 15 minutes on 2 cores), summarised by
## benchstat and internal/benchreport into docs/benchmarks.md and its SVG figures
BENCH_DIR   ?= tmp/bench
BENCH_COUNT ?= 6
bench: SHELL := /bin/bash
bench:
	@rm -rf $(BENCH_DIR) && mkdir -p $(BENCH_DIR)/samples $(BENCH_DIR)/prof
	@date -u +%FT%TZ > $(BENCH_DIR)/start; cat /proc/loadavg > $(BENCH_DIR)/load-before 2>/dev/null || true
	@echo "bench: $$(nproc) cores, $$($(GO) env GOVERSION); raw output in $(BENCH_DIR)"
	$(call bench_go,natsstore,[1/6] natsstore: Acquire/Renew/Release vs the raw KV write,-bench=BenchmarkStoreVsRawKV -benchmem -count=$(BENCH_COUNT),./natsstore)
	$(call bench_go,actors,[2/6] actors: watchdog footprint/renewal and Hold.Token,-bench='BenchmarkWatchdog|BenchmarkHoldToken' -benchmem -count=$(BENCH_COUNT),./actors)
	$(call bench_go,supervision,[3/6] supervision: supervised vs bare throughput and restart latency,-bench=. -benchmem -count=$(BENCH_COUNT),./supervision)
	$(call bench_go,handover,[4/6] failover: graceful handover through the watch vs polling (about 3 min),-bench=BenchmarkHandover -benchtime=40x -count=$(BENCH_COUNT),./actors)
	$(call bench_go,crash,[5/6] failover: crash takeover vs the TTL (about 2.5 min),-bench=BenchmarkCrashTakeover -benchtime=20x -count=$(BENCH_COUNT),./actors)
	@echo "bench: $$(date +%T) [6/6] profiles (one run each)"
	$(call bench_prof,natsstore-acquire,-bench=BenchmarkStoreVsRawKV/acquire,./natsstore,-cum -focus='natsstore\.\(\*Store\)\.Acquire')
	$(call bench_prof,natsstore-renew,-bench=BenchmarkStoreVsRawKV/renew,./natsstore,-cum -focus='natsstore\.\(\*Store\)\.Renew')
	$(call bench_prof,natsstore-release,-bench=BenchmarkStoreVsRawKV/release,./natsstore,-cum -focus='natsstore\.\(\*Store\)\.Release')
	$(call bench_prof,actors-handover,-bench=BenchmarkHandover/watch -benchtime=40x,./actors,)
	$(call bench_prof,actors-crash,-bench=BenchmarkCrashTakeover -benchtime=5x,./actors,)
	$(call bench_prof,supervision-throughput,-bench=BenchmarkThroughput,./supervision,)
	@echo "bench: $$(date +%T) benchstat and report"
	@$(GO) run $(BENCHSTAT) $(BENCH_DIR)/*.bench.txt > $(BENCH_DIR)/benchstat.txt
	@$(GO) run ./internal/benchreport/cmd/benchreport -dir $(BENCH_DIR) -out docs/benchmarks.md

## bench-report: rewrite docs/benchmarks.md from the last make bench run's raw output
bench-report:
	$(GO) run ./internal/benchreport/cmd/benchreport -dir $(BENCH_DIR) -out docs/benchmarks.md

# bench_go NAME,WHAT,FLAGS,PKG runs one go test -bench command (recorded in
# commands.txt), keeps its output in NAME.bench.txt and shows its results as
# they come; failover benchmarks append their raw latencies to samples/.
define bench_go
	@echo "bench: $$(date +%T) $(2)"
	@echo "go test -run='^$$' $(3) $(4)" >> $(BENCH_DIR)/commands.txt
	@ASTER_BENCH_SAMPLES=$(abspath $(BENCH_DIR))/samples $(GO) test -run='^$$' -timeout=30m $(3) $(4) 2>&1 \
		| tee $(BENCH_DIR)/$(1).bench.txt | grep --line-buffered -E '^(Benchmark|--- FAIL|FAIL|panic)'; \
		test $${PIPESTATUS[0]} -eq 0
endef

# bench_prof NAME,FLAGS,PKG,PPROF runs one benchmark once with CPU and memory
# profiles and keeps their pprof -top (with PPROF options for the CPU one).
define bench_prof
	@echo "go test -run='^$$' $(2) -count=1 -cpuprofile $(1).cpu.pprof -memprofile $(1).mem.pprof $(3)" >> $(BENCH_DIR)/commands.txt
	@$(GO) test -run='^$$' -timeout=30m $(2) -count=1 -cpuprofile $(BENCH_DIR)/prof/$(1).cpu.pprof \
		-memprofile $(BENCH_DIR)/prof/$(1).mem.pprof -o $(BENCH_DIR)/prof/$(1).test $(3) > $(BENCH_DIR)/prof/$(1).out 2>&1 \
		|| { cat $(BENCH_DIR)/prof/$(1).out; exit 1; }
	@$(GO) tool pprof -top -nodecount=30 $(4) $(BENCH_DIR)/prof/$(1).test $(BENCH_DIR)/prof/$(1).cpu.pprof \
		> $(BENCH_DIR)/prof/$(1).cpu.top.txt 2>/dev/null
	@$(GO) tool pprof -top -nodecount=30 -sample_index=alloc_space $(BENCH_DIR)/prof/$(1).test \
		$(BENCH_DIR)/prof/$(1).mem.pprof > $(BENCH_DIR)/prof/$(1).mem.top.txt 2>/dev/null
endef

## chaos: the full fault-injection suite (module chaos/); regenerates docs/reliability.md
chaos:
	cd chaos && $(GO) test -race -count=1 -timeout 60m ./scenario -chaos.full -chaos.report ../../docs/reliability.md

tidy:
	$(GO) mod tidy
