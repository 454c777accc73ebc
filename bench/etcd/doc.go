// Package peer measures Aster's lock beside etcd's concurrency package
// (embedded etcd, single member, loopback), interleaved in one run: the
// peer numbers of docs/benchmarks.md. It is a module of its own, so that
// etcd's dependencies stay out of Aster's go.mod.
//
// Every server runs in a process of its own (the test binary, started
// again in server mode), so that the client's and the server's CPU time
// and memory can be told apart: nats-server with JetStream's default
// sync_interval (2 minutes), nats-server with sync_interval always (every
// write flushed before it is acknowledged, as etcd fsyncs every commit by
// default), and etcd with its defaults. Run it with make bench-peer, or:
//
//	cd bench/etcd && go test -run '^$' -bench . -benchtime 1x -timeout 30m
//
// See BenchmarkPeer for what each sub-benchmark measures.
package peer
