package singleton

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// IDStore remembers, by request ID, the replies of requests already handled.
type IDStore interface {
	// Get returns the reply recorded for id, and whether there is one.
	Get(ctx context.Context, id string) (reply []byte, ok bool, err error)
	// Put records reply for id.
	Put(ctx context.Context, id string, reply []byte) error
}

// Dedupe wraps h so that a request whose ID store already has a reply is
// answered with that reply, without calling h again: a request re-sent
// after its reply was lost (the leader crashed after handling it, or the
// caller's attempt timed out) is applied once, as long as the first
// handling recorded its reply. It records a reply after h returns it; a
// handler error is not recorded (the caller sees it and may try again).
//
// This is effectively-once only for effects that end before the reply is
// recorded and that a crash cannot leave half done. The strongest form
// records the ID in the same transaction as the effect (for example a
// table with the request ID as its primary key, written with the term's
// token in the fencing rule of lease.Fence); Dedupe is the simple form for
// the common case.
func Dedupe(store IDStore, h Handler) Handler {
	return func(ctx context.Context, req *Request) ([]byte, error) {
		if req.ID == "" {
			return h(ctx, req)
		}
		if reply, ok, err := store.Get(ctx, req.ID); err != nil {
			return nil, fmt.Errorf("singleton: dedupe: %w", err)
		} else if ok {
			return reply, nil
		}
		reply, err := h(ctx, req)
		if err != nil {
			return nil, err
		}
		if err := store.Put(ctx, req.ID, reply); err != nil {
			return nil, fmt.Errorf("singleton: dedupe: handled, but not recorded: %w", err)
		}
		return reply, nil
	}
}

// MemIDStore is an IDStore in memory that keeps the most recent IDs: for a
// singleton that runs in one process, or tests. It is safe for concurrent
// use.
type MemIDStore struct {
	mu    sync.Mutex
	max   int
	order *list.List // of string, oldest first
	seen  map[string]memID
}

type memID struct {
	reply []byte
	at    *list.Element
}

// NewMemIDStore returns a MemIDStore that remembers at most max IDs (0
// means 100,000), forgetting the oldest.
func NewMemIDStore(max int) *MemIDStore {
	if max <= 0 {
		max = 100_000
	}
	return &MemIDStore{max: max, order: list.New(), seen: make(map[string]memID)}
}

// Get implements IDStore.
func (s *MemIDStore) Get(_ context.Context, id string) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.seen[id]
	return e.reply, ok, nil
}

// Put implements IDStore.
func (s *MemIDStore) Put(_ context.Context, id string, reply []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.seen[id]; ok {
		return nil
	}
	if s.order.Len() >= s.max {
		oldest := s.order.Front()
		s.order.Remove(oldest)
		delete(s.seen, oldest.Value.(string))
	}
	s.seen[id] = memID{reply: reply, at: s.order.PushBack(id)}
	return nil
}

// KVIDStore is an IDStore in a JetStream KV bucket, for a singleton that
// moves between instances: each ID is a key ("req.<id>") written once. Give
// the bucket a TTL (MaxAge) longer than any caller's deadline, so that old
// IDs are forgotten, and a MaxValueSize that fits the replies.
type KVIDStore struct{ kv jetstream.KeyValue }

// NewKVIDStore returns an IDStore over kv.
func NewKVIDStore(kv jetstream.KeyValue) *KVIDStore { return &KVIDStore{kv: kv} }

// Get implements IDStore.
func (s *KVIDStore) Get(ctx context.Context, id string) ([]byte, bool, error) {
	e, err := s.kv.Get(ctx, "req."+id)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	return e.Value(), true, nil
}

// Put implements IDStore. A second Put of one ID keeps the first reply.
func (s *KVIDStore) Put(ctx context.Context, id string, reply []byte) error {
	_, err := s.kv.Create(ctx, "req."+id, reply)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return nil
	}
	return err
}

var (
	_ IDStore = (*MemIDStore)(nil)
	_ IDStore = (*KVIDStore)(nil)
)
