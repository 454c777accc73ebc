// Package shardtest helps test sharded fleets: MemStore, an in-memory
// lease.Store that is also a shard.Directory, and Run, the conformance suite
// of shard.Directory for stores that implement it.
package shardtest
