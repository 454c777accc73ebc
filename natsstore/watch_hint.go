package natsstore

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// While a watch is down (its consumer was lost and a new one is not made
// yet), it follows its keys through the writes themselves. A watch's
// consumer can only be made by JetStream's meta leader, which a cluster
// elects apart from the bucket's stream leader: when the killed server led
// both, the stream takes writes again seconds before a consumer can be made
// (4 to 9 s after the kill for each election). A write to a key is an
// ordinary NATS publish to the key's subject, which any subscriber of the
// subject sees whether or not JetStream has a meta leader. So a watch that
// is down subscribes to its subjects, and for each key written reads the
// key from the stream (the subscriber sees a write as it is published, not
// whether the stream took it) and reports what the read shows, as the watch
// would have. The subscription ends when a new watch is made, which reports
// every key's state again: in the healthy case it costs nothing.
//
// The user needs permission to subscribe to the bucket's key subjects for
// this; without it the server refuses the subscription, and a standby whose
// watch is down learns of a release at its next poll, as before.

// hintRetries are the pauses before each read of a written key: the first
// read often reaches the stream leader before it has stored the write that
// the subscriber saw published. A key whose read shows nothing new after
// them was not written (the write was refused).
var hintRetries = [...]time.Duration{0, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond}

const (
	// hintReadLimit bounds one read of a written key.
	hintReadLimit = time.Second
	// hintFlushLimit bounds the wait for the server to confirm the
	// subscription.
	hintFlushLimit = 250 * time.Millisecond
)

// hints is the subscription of a watch that is down, and the keys written
// since their last read.
type hints struct {
	sub  *nats.Subscription
	pre  string        // cut from subjects to make keys
	wake chan struct{} // signalled when a key is written

	mu      sync.Mutex
	pending map[string]hinted
}

// hinted is what the writes to a key since its last read expected.
type hinted struct {
	expect uint64 // the highest revision a write expected the key at
	known  bool   // every write said which revision it expected
	retry  bool   // a write was seen: read again while it may not have landed yet
}

// handle records a write seen on the subscription, on its goroutine.
func (h *hints) handle(m *nats.Msg) {
	key, ok := strings.CutPrefix(m.Subject, h.pre)
	if !ok || key == "" {
		return
	}
	exp, err := strconv.ParseUint(m.Header.Get(jetstream.ExpectedLastSubjSeqHeader), 10, 64)
	h.mu.Lock()
	old, seen := h.pending[key]
	switch {
	case err != nil:
		h.pending[key] = hinted{expect: max(old.expect, exp), retry: true}
	case !seen || !old.retry:
		h.pending[key] = hinted{expect: exp, known: true, retry: true}
	default:
		h.pending[key] = hinted{expect: max(old.expect, exp), known: old.known, retry: true}
	}
	h.mu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// take returns the keys written since the last take.
func (h *hints) take() map[string]hinted {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.pending
	h.pending = map[string]hinted{}
	return p
}

// hintRead is the outcome of reading the keys of one take: the messages
// that showed something new.
type hintRead struct {
	gen   uint64
	found []keyMsg
}

// keyMsg is the last message of a key.
type keyMsg struct {
	key string
	m   *jetstream.RawStreamMsg
}

// startHints subscribes to the watch's subjects while it is down; for a
// watch of one key, it also reads the key once, for a change made while
// the lost watch was silent.
func (r *watchRun) startHints() {
	ws := r.ws
	if r.hint != nil || ws.nc == nil || ws.hintsRefused.Load() {
		return
	}
	if err := ws.nc.LastError(); hintRefusal(err) {
		ws.hintsRefused.Store(true)
		ws.log.Info("natsstore: the user may not subscribe to the bucket's keys; a standby whose watch is down "+
			"learns of a release at its next poll", "err", err)
		return
	}
	h := &hints{pre: ws.putPrefix, wake: make(chan struct{}, 1), pending: map[string]hinted{}}
	if !strings.HasSuffix(r.key, ">") {
		// Set before the subscription's goroutine may touch them.
		h.pending[r.key] = hinted{}
		h.wake <- struct{}{}
	}
	sub, err := ws.nc.Subscribe(ws.putPrefix+r.key, h.handle)
	if err != nil {
		ws.log.Debug("natsstore: following a watch's keys while it is down failed", "lease", r.key, "err", err)
		return
	}
	h.sub = sub
	// Once the server has the subscription, every write is seen: the read
	// of the key asked for above (made once this returns) covers the ones
	// made before.
	_ = ws.nc.FlushTimeout(hintFlushLimit)
	r.hint = h
	r.hintRevs = map[string]uint64{}
}

// stopHints ends the subscription; reads in flight are ignored.
func (r *watchRun) stopHints() {
	if r.hint == nil {
		return
	}
	_ = r.hint.sub.Unsubscribe()
	r.hint, r.hintRevs = nil, nil
	r.hintGen++ // a read in flight reports to no one
}

// hintWake returns the channel that signals writes, nil when there is no
// subscription.
func (r *watchRun) hintWake() <-chan struct{} {
	if r.hint == nil {
		return nil
	}
	return r.hint.wake
}

// readHints reads the written keys in the background, unless a read is in
// flight (it reads them when it is over).
func (r *watchRun) readHints(ctx context.Context) {
	if r.hint == nil || r.hintReading {
		return
	}
	keys := r.hint.take()
	if len(keys) == 0 {
		return
	}
	floors := make(map[string]uint64, len(keys))
	for k := range keys {
		floors[k] = max(r.hintFloor, r.hintRevs[k])
	}
	r.hintReading = true
	gen, ws := r.hintGen, r.ws
	ws.goroutines.Add(1) // the caller's goroutine holds a count
	go func() {
		defer ws.goroutines.Done()
		r.hintsRead <- hintRead{gen: gen, found: ws.readWritten(ctx, keys, floors)} // never blocks: one at a time
	}()
}

// readWritten reads each key of keys until it shows a revision above its
// floor, pausing as hintRetries says while it still shows the revision its
// writes expected, and returns the messages that showed one.
func (ws *watches) readWritten(ctx context.Context, keys map[string]hinted, floors map[string]uint64) []keyMsg {
	var found []keyMsg
	for _, pause := range hintRetries {
		if len(keys) == 0 {
			break
		}
		if pause > 0 && !sleep(ctx, pause) {
			return found
		}
		for k, h := range keys {
			m, err := ws.read(ctx, time.Now().Add(hintReadLimit), k)
			switch {
			case err != nil:
				delete(keys, k) // the watch's re-creation, or a standby's poll, tells
			case m.Sequence > floors[k]:
				found = append(found, keyMsg{key: k, m: m})
				delete(keys, k)
			case !h.retry, h.known && m.Sequence > h.expect:
				delete(keys, k) // nothing new, and no write on its way (refused: the key had moved on)
			}
		}
	}
	return found
}

// deliverHints hands over what the reads of written keys showed, unless a
// new watch was made meanwhile (it reports the keys itself).
func (r *watchRun) deliverHints(res hintRead) {
	if res.gen != r.hintGen || r.w != nil {
		return
	}
	for _, f := range res.found {
		m := f.m
		if m.Sequence <= max(r.hintFloor, r.hintRevs[f.key]) {
			continue
		}
		r.hintRevs[f.key] = m.Sequence
		r.out.entry(&kvEntry{bucket: r.ws.bucket, key: f.key, value: m.Data, revision: m.Sequence, created: m.Time,
			op: entryOp(m.Header), expiry: expiryMarker(m.Header)}, false)
	}
}

// hintRefusal reports whether err is the server's refusal of a
// subscription to a key's subject (a watch that is down following its
// keys): nothing waits on it, so it explains no failure.
func hintRefusal(err error) bool {
	v, ok := parseViolation(err)
	return ok && v.subscribe && strings.Contains(v.subject, "$KV.")
}
