// Package leasetest checks lease.Store implementations: Run is the
// conformance suite every store must pass, and MemStore is an in-memory store
// with an injectable clock for tests, usable inside testing/synctest.
package leasetest
