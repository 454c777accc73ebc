package natsstore

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asterforge/aster/lease"
)

// A read of a replicated bucket that shows a key (or the stream's end)
// below a revision the store has seen is either lost writes or a stale
// answer. Stale answers happen without any loss: a stream leader deposed
// without knowing it yet answers from its old state until it steps down,
// and both it and the new leader answer a request, the first answer
// winning. writes.current cannot tell them apart: the leader that confirms a
// read is not always the one that answered it. So such a read is
// unavailable, retried by its caller, and the store stops only when the
// regression persists past regressionPersists, longer than a deposed
// leader goes on answering. Tokens never depend on it: a write that lands
// at or below a revision seen stops the store at once
// (bucketChecks.landed), and a write needs a quorum, which a deposed
// leader does not have.
const regressionPersists = 30 * time.Second

// staleReads tracks the keys whose reads showed a regression, "" for the
// stream's end.
type staleReads struct {
	n  atomic.Int32 // len(m), read without mu on every read
	mu sync.Mutex
	m  map[string]staleSpell
}

// staleSpell is a run of regressed reads of one key.
type staleSpell struct {
	first, last time.Time
}

// regressedRead judges a read of key (or of the stream's end, for "") that
// showed revision got below revision highest, already confirmed current by
// writes.current: for a bucket of one replica, or when the regression has
// persisted for regressionPersists, the store stops (regressed);
// otherwise the read is unavailable.
func (w *writes) regressedRead(what, key string, highest, got uint64) error {
	if !w.replicated() {
		return w.regressed(key, highest, got)
	}
	now := w.keys.now()
	st := &w.behind
	st.mu.Lock()
	sp, ok := st.m[key]
	if !ok || now.Sub(sp.last) > regressionPersists {
		sp.first = now // a new spell: the last one ended long ago
	}
	sp.last = now
	if st.m == nil {
		st.m = make(map[string]staleSpell)
	}
	for k, other := range st.m { // spells no read ended: over by now
		if now.Sub(other.last) > regressionPersists {
			delete(st.m, k)
		}
	}
	st.m[key] = sp
	st.n.Store(int32(len(st.m)))
	st.mu.Unlock()
	lasted := now.Sub(sp.first)
	if lasted >= regressionPersists {
		return w.regressed(key, highest, got)
	}
	if sp.first.Equal(now) {
		ev := StaleRead{Bucket: w.bucket, Key: key, Highest: highest, Got: got}
		w.log.Warn("natsstore: "+ev.String(), "key", key)
		w.emit(ev)
	}
	where := atRevision(key)
	return fmt.Errorf("natsstore: %s: %w: %s at revision %d, below revision %d seen before, for %v: a stale "+
		"answer (a stream leader deposed without knowing it yet), or lost writes if it lasts %v",
		what, lease.ErrUnavailable, where, got, highest, lasted.Round(time.Millisecond), regressionPersists)
}

// freshRead ends a spell of regressed reads of key: a read showed it at or
// above every revision seen.
func (b *keyBook) freshRead(key string) {
	st := &b.behind
	if st.n.Load() == 0 {
		return
	}
	st.mu.Lock()
	delete(st.m, key)
	st.n.Store(int32(len(st.m)))
	st.mu.Unlock()
}
