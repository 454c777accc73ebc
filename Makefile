# Aster: everything a newcomer or CI needs, with only Go and make installed.

GO          ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
BENCHSTAT   ?= golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
PKGS        ?= ./...

.PHONY: run test lint cover bench bench-peer bench-report chaos conformance tidy

## run: the main demo (embedded NATS, three instances, kill/pause/stop the leader); exits by itself.
##      Flags go in ARGS, e.g. make run ARGS="-ttl 3s -instances 4", or ARGS=-help.
##      It builds the demo first into tmp/bin, naming each package it compiles: the first build
##      downloads the modules and compiles for a few minutes; later ones take seconds.
run:
	@echo "make run: building the demo into tmp/bin (the first build takes a few minutes; each package compiled is listed)..."
	@mkdir -p tmp/bin
	$(GO) build -v -o tmp/bin/outbox ./examples/outbox
	@echo "make run: built; running tmp/bin/outbox $(ARGS)"
	@./tmp/bin/outbox $(ARGS)

## test: vet, then every test with the race detector (the CI command)
test:
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 $(PKGS)
	cd chaos && $(GO) vet ./... && $(GO) test -race -count=1 -p 1 -short ./...
	cd deploy/kubernetes && $(GO) vet ./... && $(GO) test -race -count=1 ./...

## lint: gofmt, go vet and staticcheck (fetched at a pinned version), on every module
lint:
	@out=$$(git ls-files --cached --others --exclude-standard '*.go' | xargs gofmt -l); \
		if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run $(STATICCHECK) $(PKGS)
	cd chaos && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./...
	cd deploy/kubernetes && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./...

## cover: test coverage per package, and an HTML report in cover.html
cover:
	$(GO) test -race -count=1 -coverprofile=cover.out $(PKGS)
	$(GO) tool cover -func=cover.out | tail -1
	$(GO) tool cover -html=cover.out -o cover.html

## bench: benchmarks and failover measurements, and Aster's lock beside etcd (bench-peer) (about 45
## minutes on 2 cores), summarised by benchstat and internal/benchreport into docs/benchmarks.md and its SVG figures
BENCH_DIR   ?= tmp/bench
BENCH_COUNT ?= 6
BENCH_COUNT_SLOW ?= 3
comma := ,
bench: SHELL := /bin/bash
bench:
	@rm -rf $(BENCH_DIR) && mkdir -p $(BENCH_DIR)/samples $(BENCH_DIR)/prof
	@date -u +%FT%TZ > $(BENCH_DIR)/start; cat /proc/loadavg > $(BENCH_DIR)/load-before 2>/dev/null || true
	@echo "bench: $$(nproc) cores, $$($(GO) env GOVERSION); raw output in $(BENCH_DIR)"
	$(call bench_go,natsstore,[1/19] natsstore: Acquire/Renew/Release vs the raw KV write; overhead; renewals/s; watch,-bench='BenchmarkStoreVsRawKV|BenchmarkOverhead|BenchmarkRenewals|BenchmarkWatchRelease' -benchmem -count=$(BENCH_COUNT),./natsstore)
	$(call bench_go,leasehold,[2/19] leasehold: watchdog footprint and renewal; Hold.Token,-bench='BenchmarkWatchdog|BenchmarkHoldToken' -benchmem -count=$(BENCH_COUNT),./internal/leasehold)
	$(call bench_go,supervision,[3/19] supervision: supervised vs bare throughput; restart latency,-bench=. -benchmem -count=$(BENCH_COUNT),./supervision)
	$(call bench_go,handover,[4/19] failover: graceful handover through the watch vs polling (about 3 min),-bench=BenchmarkHandover -benchtime=40x -count=$(BENCH_COUNT),./actors)
	$(call bench_go,crash,[5/19] failover: crash takeover vs the TTL (about 3 min),-bench=BenchmarkCrashTakeover -benchtime=20x -count=$(BENCH_COUNT),./actors)
	@echo "# Fewer runs for the lock scale benchmark: each of its four sub-benchmarks holds the locks for 12.5 s of real time after taking them (a run takes about 80 s); 1k and 30k locks only add points to the figure." >> $(BENCH_DIR)/commands.txt
	$(call bench_go,lock-held,[6/19] lock: memory$(comma) renewal lag and CPU with 10k and 100k leases held (about 4 min),-bench=BenchmarkHeldLocks -benchtime=1x -count=$(BENCH_COUNT_SLOW),./lock)
	$(call bench_go,lock-held-more,[7/19] lock: renewal lag with 1k and 30k leases held (figure only; about 1 min),-bench=BenchmarkHeldLocks -benchtime=1x -count=1,./lock,ASTER_LOCK_BENCH_LOCKS=1000$(comma)30000)
	$(call bench_go,memstore,[8/19] leasetest: MemStore.Renew alone (the baseline of CPU per renewal),-bench=BenchmarkMemStoreRenew -benchmem -count=$(BENCH_COUNT),./lease/leasetest)
	$(call bench_go,lock-nats,[9/19] lock on NATS: Acquire + Release vs two raw KV writes; lock.New; a short-lived Locker's life; handover between 3 and 100 candidates,-bench='BenchmarkAcquireRelease|BenchmarkNew|BenchmarkLockerLife|BenchmarkLockHandover' -benchtime=2000x -count=$(BENCH_COUNT),./lock)
	$(call bench_go,lock-nats-held,[10/19] lock on NATS: steady CPU with 10k locks (a lease each$(comma) and under a session) and 100k (session) (about 4 min),-bench=BenchmarkHeldLocksNATS -benchtime=1x -count=$(BENCH_COUNT_SLOW),./lock)
	$(call bench_go,lock-takeover,[11/19] lock on NATS: crash takeover of 4 locks (leases of their own$(comma) under a session) and graceful handover under sessions$(comma) TTL 2 s (about 5 min),-bench='BenchmarkLockCrashTakeover|BenchmarkSessionLockHandover' -benchtime=10x -count=$(BENCH_COUNT_SLOW),./lock)
	$(call bench_go,sync,[12/19] natsstore/embedded: acquire$(comma) renew and handover with sync_interval always vs the default (about 1 min),-bench=BenchmarkSync -benchtime=2000x -count=$(BENCH_COUNT),./natsstore/embedded)
	$(call bench_go,observed,[13/19] natsstore: observed-expiry takeover after the last renewal (servers before 2.11; about 1 min),-bench=BenchmarkObservedTakeover -benchtime=10x -count=$(BENCH_COUNT_SLOW),./natsstore)
	$(call bench_go,prefix,[14/19] natsstore: one prefix watch over 1$(comma)024 keys,-bench=BenchmarkWatchPrefix1024 -benchtime=20x -count=$(BENCH_COUNT),./natsstore)
	$(call bench_go,singleton,[15/19] singleton: requests routed to the leader vs a plain NATS request,-bench='BenchmarkRequest$$' -benchtime=10000x -count=$(BENCH_COUNT),./singleton)
	$(call bench_go,singleton-handover,[16/19] singleton: requests across 100 handovers (about 1 min),-bench=BenchmarkRequestHandover -benchtime=100x -count=$(BENCH_COUNT_SLOW),./singleton)
	$(call bench_go,place,[17/19] shard: one placement of 1$(comma)024 shards over 8 members,-bench=BenchmarkPlace1024 -benchmem -count=$(BENCH_COUNT),./shard)
	$(call bench_go,fleet,[18/19] shard: 1$(comma)024 shards on 8 members: steady CPU$(comma) join$(comma) drain and crash (about 3 min),-bench=BenchmarkFleet1024 -benchtime=3x -count=$(BENCH_COUNT_SLOW),./shard)
	@$(MAKE) --no-print-directory bench-peer BENCH_DIR=$(BENCH_DIR) STEP='[19/19] '
	@echo "bench: $$(date +%T) profiles (one run each)"
	$(call bench_prof,natsstore-acquire,-bench=BenchmarkStoreVsRawKV/acquire,./natsstore,-cum -focus='natsstore\.\(\*Store\)\.Acquire')
	$(call bench_prof,natsstore-renew,-bench=BenchmarkStoreVsRawKV/renew,./natsstore,-cum -focus='natsstore\.\(\*Store\)\.Renew')
	$(call bench_prof,natsstore-release,-bench=BenchmarkStoreVsRawKV/release,./natsstore,-cum -focus='natsstore\.\(\*Store\)\.Release')
	$(call bench_prof,actors-handover,-bench=BenchmarkHandover/watch -benchtime=40x,./actors,)
	$(call bench_prof,actors-crash,-bench=BenchmarkCrashTakeover -benchtime=5x,./actors,)
	$(call bench_prof,supervision-throughput,-bench=BenchmarkThroughput,./supervision,)
	$(call bench_prof,leasehold-renew-cpu,-bench='BenchmarkWatchdogRenewCPU$$' -benchtime=100000x,./internal/leasehold,)
	$(call bench_prof,lock-held-10000,-bench='BenchmarkHeldLocks/locks=10000/acquire=burst$$' -benchtime=1x,./lock,)
	$(call bench_prof,lock-held-100000,-bench='BenchmarkHeldLocks/locks=100000/acquire=burst$$' -benchtime=1x,./lock,)
	$(call bench_prof,lock-acquire-lease,-bench='BenchmarkAcquireRelease/lease$$' -benchtime=2000x,./lock,-cum -focus='lock\.')
	$(call bench_prof,lock-acquire-session,-bench='BenchmarkAcquireRelease/session$$' -benchtime=2000x,./lock,-cum -focus='lock\.')
	$(call bench_prof,lock-held-nats-session,-bench='BenchmarkHeldLocksNATS/locks=100000/mode=session$$' -benchtime=1x,./lock,)
	$(call bench_prof,lock-handover-100,-bench='BenchmarkLockHandover/candidates=100$$' -benchtime=2000x,./lock,)
	@echo "bench: $$(date +%T) benchstat and report"
	@$(GO) run $(BENCHSTAT) $(BENCH_DIR)/*.bench.txt > $(BENCH_DIR)/benchstat.txt
	@$(GO) run ./internal/benchreport/cmd/benchreport -dir $(BENCH_DIR) -out docs/benchmarks.md

## bench-peer: Aster's lock beside etcd's concurrency package (module bench/etcd: embedded etcd v3.7.3,
##      nats-server with its default sync_interval and with sync always, etcd with and without fsync; about 8 minutes a run), into
##      $(BENCH_DIR)/peer.bench.txt; make bench runs it, and make bench-report reports it
BENCH_COUNT_PEER ?= 1
bench-peer: SHELL := /bin/bash
bench-peer:
	@mkdir -p $(BENCH_DIR)
	@echo "bench: $$(date +%T) $(STEP)peer: Aster's lock beside etcd (bench/etcd; about 8 min a run)"
	@echo "(cd bench/etcd && go test -run='^$$' -bench=BenchmarkPeer -benchtime=1x -count=$(BENCH_COUNT_PEER) .)" >> $(BENCH_DIR)/commands.txt
	@cd bench/etcd && $(GO) test -run='^$$' -timeout=60m -bench=BenchmarkPeer -benchtime=1x -count=$(BENCH_COUNT_PEER) . 2>&1 \
		| tee $(abspath $(BENCH_DIR))/peer.bench.txt | grep --line-buffered -E '^(Benchmark|--- FAIL|FAIL|panic)'; \
		exit $${PIPESTATUS[0]}

## bench-report: rewrite docs/benchmarks.md from the last make bench run's raw output
bench-report:
	$(GO) run ./internal/benchreport/cmd/benchreport -dir $(BENCH_DIR) -out docs/benchmarks.md

# bench_go NAME,WHAT,FLAGS,PKG[,ENV] runs one go test -bench command (recorded
# in commands.txt), keeps its output in NAME.bench.txt and shows its results
# as they come; failover benchmarks append their raw latencies to samples/.
define bench_go
	@echo "bench: $$(date +%T) $(2)"
	@echo "$(strip $(5) go test -run='^$$' $(3) $(4))" >> $(BENCH_DIR)/commands.txt
	@$(5) ASTER_BENCH_SAMPLES=$(abspath $(BENCH_DIR))/samples $(GO) test -run='^$$' -timeout=30m $(3) $(4) 2>&1 \
		| tee $(BENCH_DIR)/$(1).bench.txt | grep --line-buffered -E '^(Benchmark|--- FAIL|FAIL|panic)'; \
		rc=$${PIPESTATUS[0]}; out=$(BENCH_DIR)/$(1).bench.txt; \
		if [ $$rc -ne 0 ]; then \
			if grep -q -E '^(--- FAIL|panic)' $$out || ! grep -q '^PASS' $$out; then exit $$rc; fi; \
			msg="$(1): go test exited $$rc after every benchmark passed: $$(grep -m1 -E 'goleak|race|timed out' $$out || echo 'see its output')"; \
			echo "bench: warning: $$msg"; echo "$$msg" >> $(BENCH_DIR)/warnings.txt; \
		fi
endef

# bench_prof NAME,FLAGS,PKG,PPROF runs one benchmark once with CPU and memory
# profiles and keeps their pprof -top (with PPROF options for the CPU one,
# and, without them, also the -cum view).
define bench_prof
	@echo "go test -run='^$$' $(2) -count=1 -cpuprofile $(1).cpu.pprof -memprofile $(1).mem.pprof $(3)" >> $(BENCH_DIR)/commands.txt
	@$(GO) test -run='^$$' -timeout=30m $(2) -count=1 -cpuprofile $(BENCH_DIR)/prof/$(1).cpu.pprof \
		-memprofile $(BENCH_DIR)/prof/$(1).mem.pprof -o $(BENCH_DIR)/prof/$(1).test $(3) > $(BENCH_DIR)/prof/$(1).out 2>&1 \
		|| { out=$(BENCH_DIR)/prof/$(1).out; \
			if grep -q '^PASS' $$out && ! grep -q -E '^(--- FAIL|panic)' $$out; then \
				msg="profile $(1): go test failed after the benchmark passed: $$(grep -m1 -E 'goleak|race|timed out' $$out || echo 'see its output')"; \
				echo "bench: warning: $$msg"; echo "$$msg" >> $(BENCH_DIR)/warnings.txt; \
			else cat $$out; exit 1; fi; }
	@$(GO) tool pprof -top -nodecount=30 $(4) $(BENCH_DIR)/prof/$(1).test $(BENCH_DIR)/prof/$(1).cpu.pprof \
		> $(BENCH_DIR)/prof/$(1).cpu.top.txt 2>/dev/null
	$(if $(strip $(4)),,@$(GO) tool pprof -top -cum -nodecount=30 $(BENCH_DIR)/prof/$(1).test $(BENCH_DIR)/prof/$(1).cpu.pprof \
		> $(BENCH_DIR)/prof/$(1).cpu-cum.top.txt 2>/dev/null)
	@$(GO) tool pprof -top -nodecount=30 -sample_index=alloc_space $(BENCH_DIR)/prof/$(1).test \
		$(BENCH_DIR)/prof/$(1).mem.pprof > $(BENCH_DIR)/prof/$(1).mem.top.txt 2>/dev/null
endef

## conformance: certify your own NATS deployment: the lease.Store conformance suite (both expiry modes)
##      and a crash-takeover check, against the server at NATS_URL, each in a bucket of its own that it
##      deletes afterwards (the user needs permission to create and delete streams). Optional:
##      NATS_CREDS (a .creds file) or NATS_USER and NATS_PASSWORD, NATS_CA (TLS root CA), NATS_DOMAIN.
##      make conformance NATS_URL=nats://nats-1:4222 NATS_CREDS=/etc/aster/admin.creds
NATS_URL      ?=
NATS_CREDS    ?=
NATS_USER     ?=
NATS_PASSWORD ?=
NATS_CA       ?=
NATS_DOMAIN   ?=
conformance:
	@if [ -z "$(NATS_URL)" ]; then echo "conformance: set NATS_URL, e.g. make conformance NATS_URL=nats://127.0.0.1:4222"; exit 2; fi
	$(GO) test -race -count=1 -v -timeout 10m -run '^(TestConformanceSingleNode|TestConformanceObservedExpiry|TestCrashTakeover)$$' \
		./natsstore -args -nats.url='$(NATS_URL)' -nats.creds='$(NATS_CREDS)' -nats.user='$(NATS_USER)' \
		-nats.password='$(NATS_PASSWORD)' -nats.ca='$(NATS_CA)' -nats.domain='$(NATS_DOMAIN)'

## chaos: the full fault-injection suite (module chaos/); regenerates docs/reliability.md
chaos:
	cd chaos && $(GO) test -race -count=1 -timeout 60m ./scenario -chaos.full -chaos.report ../../docs/reliability.md

tidy:
	$(GO) mod tidy
