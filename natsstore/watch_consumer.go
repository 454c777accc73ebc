package natsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// Bounds of a watch consumer's idle heartbeat interval.
const (
	minWatchHeartbeat = 100 * time.Millisecond
	maxWatchHeartbeat = 5 * time.Second // nats.go's for its own KV watches
)

// consumerWatch is a KV watch of one key, or of a prefix, over an ephemeral
// push consumer that the store makes itself, as nats.go's KeyValue.Watch
// does, so that it sees what nats.go keeps to itself: the consumer's idle
// heartbeats. It delivers the last entry of each key the filter matches, a
// nil entry once those are all delivered, and then every change. It answers
// the consumer's flow control, and it ends, saying why (ended), when the
// consumer falls silent for two heartbeat intervals (a consumer lost with
// its server, or in a stream leader change, sends nothing at all) or skips
// a delivery: the store then makes a new watch, which reports each key's
// state again. nats.go's watch instead re-creates its consumer by itself
// after 10 s of silence and says nothing.
type consumerWatch struct {
	nc      *nats.Conn
	api     string // the JetStream API prefix, ending with '.'
	stream  string
	name    string // the consumer's
	pre     string // "$KV.<bucket>.", cut from subjects to make keys
	bucket  string
	timeout time.Duration // of the consumer's delete
	silence time.Duration // the watch ends after this long without a message; 0: never

	sub     *nats.Subscription
	updates chan jetstream.KeyValueEntry
	done    chan struct{} // closed by end or Stop
	once    sync.Once
	quiet   *time.Timer // the silence watchdog

	mu sync.Mutex // guards delivery; held by the handler and during creation
	delivery
}

// delivery is what a consumerWatch's handler tracks of its deliveries.
type delivery struct {
	dseq        uint64 // the consumer sequence of the last delivery
	initPending uint64
	received    uint64
	initDone    bool
	heard       time.Time // when the consumer last sent anything
	err         error     // why the watch ended
}

var _ jetstream.KeyWatcher = (*consumerWatch)(nil)

// consumerCreate is the body of a JetStream CONSUMER.CREATE request.
type consumerCreate struct {
	Stream string              `json:"stream_name"`
	Config nats.ConsumerConfig `json:"config"`
}

// consumerCreated is its answer.
type consumerCreated struct {
	Error      *jetstream.APIError `json:"error,omitempty"`
	NumPending uint64              `json:"num_pending"`
}

// watchHeartbeat returns the idle heartbeat interval of the store's watch
// consumers, half the liveness check interval, and how long a watch may
// receive nothing before it counts as dead: two intervals, or never when
// the checks are disabled.
func (c Config) watchHeartbeat() (hb, silence time.Duration) {
	check := c.watchCheck()
	if check == 0 {
		return maxWatchHeartbeat, 0
	}
	hb = min(max(check/2, minWatchHeartbeat), maxWatchHeartbeat)
	return hb, 2 * hb
}

// Watch implements keyValue: it watches the keys filter matches (a key, or
// a pattern), creating the consumer within ctx. The watch lives until Stop.
func (b *jsBucket) Watch(ctx context.Context, filter string) (jetstream.KeyWatcher, error) {
	w := &consumerWatch{
		nc:      b.nc,
		api:     b.api,
		stream:  b.stream,
		name:    nuid.Next(),
		pre:     b.pre,
		bucket:  b.bucket,
		timeout: b.deleteTimeout,
		updates: make(chan jetstream.KeyValueEntry, 256),
		done:    make(chan struct{}),
	}
	hb, silence := b.heartbeat, b.silence
	w.silence = silence
	subject := b.pre + filter
	inbox := b.nc.NewInbox()
	body, err := json.Marshal(consumerCreate{Stream: b.stream, Config: nats.ConsumerConfig{
		Name:              w.name,
		DeliverSubject:    inbox,
		DeliverPolicy:     nats.DeliverLastPerSubjectPolicy,
		AckPolicy:         nats.AckNonePolicy,
		MaxDeliver:        1,
		FilterSubject:     subject,
		ReplayPolicy:      nats.ReplayInstantPolicy,
		FlowControl:       true,
		Heartbeat:         hb,
		MemoryStorage:     true,
		Replicas:          1,
		InactiveThreshold: 5 * time.Minute, // as nats.go's: a consumer whose delete was lost goes by itself
	}})
	if err != nil {
		return nil, err
	}

	// Subscribe first, so that nothing the consumer sends is missed; the
	// handler waits for mu until the initial count is known.
	w.mu.Lock()
	defer w.mu.Unlock()
	w.heard = time.Now()
	w.sub, err = b.nc.Subscribe(inbox, w.handle)
	if err != nil {
		return nil, err
	}
	// The subscription's goroutine calls this last, after the handler;
	// mu keeps it after the creation's nil too.
	w.sub.SetClosedHandler(func(string) {
		w.mu.Lock()
		defer w.mu.Unlock()
		close(w.updates)
	})
	resp, err := b.nc.RequestWithContext(ctx, b.api+"CONSUMER.CREATE."+b.stream+"."+w.name+"."+subject, body)
	if err == nil {
		var created consumerCreated
		switch uerr := json.Unmarshal(resp.Data, &created); {
		case uerr != nil:
			err = fmt.Errorf("%w: %v", jetstream.ErrInvalidJSAck, uerr)
		case created.Error != nil:
			err = created.Error
		default:
			w.initPending = created.NumPending
		}
	}
	if err != nil {
		_ = w.sub.Unsubscribe()
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			// The server may create the consumer after all: delete it.
			go func() { _ = w.deleteConsumer() }()
		}
		return nil, err
	}
	if w.initPending == 0 {
		w.initDone = true
		w.updates <- nil
	}
	if w.silence > 0 {
		w.quiet = time.AfterFunc(w.silence, func() {
			w.end(fmt.Errorf("the watch's consumer sent nothing for %v, not even its heartbeat (every %v): "+
				"it was lost with its server or in a stream leader change, or deleted", w.silence, hb))
		})
	}
	return w, nil
}

// handle receives what the consumer sends, on the subscription's goroutine.
func (w *consumerWatch) handle(m *nats.Msg) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.heard = time.Now()
	if w.quiet != nil {
		w.quiet.Reset(w.silence)
	}
	if len(m.Data) == 0 && m.Header.Get(statusHdr) != "" {
		w.status(m)
		return
	}
	meta, err := m.Metadata()
	if err != nil || len(m.Subject) <= len(w.pre) {
		return // not a delivery of the consumer
	}
	if meta.Sequence.Consumer != w.dseq+1 {
		w.endLocked(fmt.Errorf("the watch's consumer skipped deliveries (sequence %d after %d)",
			meta.Sequence.Consumer, w.dseq))
		return
	}
	w.dseq = meta.Sequence.Consumer
	e := &kvEntry{
		bucket:   w.bucket,
		key:      m.Subject[len(w.pre):],
		value:    m.Data,
		revision: meta.Sequence.Stream,
		created:  meta.Timestamp,
		delta:    meta.NumPending,
		op:       entryOp(m.Header),
		expiry:   expiryMarker(m.Header),
	}
	if !w.push(e) {
		return
	}
	if !w.initDone {
		w.received++
		if w.received >= w.initPending || meta.NumPending == 0 {
			w.initDone = true
			w.push(nil)
		}
	}
}

// Status headers of JetStream's control messages.
const (
	statusHdr       = "Status"
	lastConsumerHdr = "Nats-Last-Consumer"
	stalledHdr      = "Nats-Consumer-Stalled"
	statusControl   = "100" // an idle heartbeat or a flow control request
)

// status handles a control message: it answers flow control (a request
// carries its reply subject; a heartbeat of a consumer stalled by flow
// control carries it in a header) and checks that a heartbeat follows the
// last delivery.
func (w *consumerWatch) status(m *nats.Msg) {
	if code := m.Header.Get(statusHdr); code != statusControl {
		w.endLocked(fmt.Errorf("the watch's consumer sent status %s %s", code, m.Header.Get("Description")))
		return
	}
	if m.Reply != "" {
		_ = m.Respond(nil)
		return
	}
	if fc := m.Header.Get(stalledHdr); fc != "" {
		_ = w.nc.Publish(fc, nil)
	}
	if last := m.Header.Get(lastConsumerHdr); last != "" {
		if n, err := strconv.ParseUint(last, 10, 64); err == nil && n != w.dseq {
			w.endLocked(fmt.Errorf("the watch's consumer skipped deliveries (sequence %d after %d)", n, w.dseq))
		}
	}
}

// push hands e over unless the watch ended.
func (w *consumerWatch) push(e jetstream.KeyValueEntry) bool {
	select {
	case w.updates <- e:
		return true
	case <-w.done:
		return false
	}
}

func entryOp(h nats.Header) jetstream.KeyValueOp {
	switch h.Get(hdrOperation) {
	case opDelete:
		return jetstream.KeyValueDelete
	case opPurge:
		return jetstream.KeyValuePurge
	}
	switch h.Get(hdrMarkerReason) {
	case reasonMaxAge, "Purge":
		return jetstream.KeyValuePurge
	case "Remove":
		return jetstream.KeyValueDelete
	}
	return jetstream.KeyValuePut
}

// expiryMarker reports whether a message with headers h is a marker the
// server wrote when a value's TTL ran out (or a bucket-wide MaxAge removed
// it: writes.confirmExpiry tells them apart).
func expiryMarker(h nats.Header) bool {
	return h.Get(hdrOperation) == "" && h.Get(hdrMarkerReason) == reasonMaxAge
}

func (w *consumerWatch) end(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.endLocked(err)
}

// endLocked ends the watch for err: its updates close.
func (w *consumerWatch) endLocked(err error) {
	if w.err == nil {
		w.err = err
	}
	w.close()
}

func (w *consumerWatch) close() {
	w.once.Do(func() {
		close(w.done)
		if w.quiet != nil {
			w.quiet.Stop()
		}
		_ = w.sub.Unsubscribe()
	})
}

// ended says why the watch ended by itself (nil if it did not) and when
// its consumer last sent anything.
func (w *consumerWatch) ended() (time.Time, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.heard, w.err
}

// Updates implements jetstream.KeyWatcher.
func (w *consumerWatch) Updates() <-chan jetstream.KeyValueEntry { return w.updates }

// Stop ends the watch and deletes its consumer, waiting for the answer up
// to the store's timeout.
func (w *consumerWatch) Stop() error {
	w.close()
	return w.deleteConsumer()
}

// deleteConsumer deletes the watch's consumer, waiting for the answer up to
// the store's timeout.
func (w *consumerWatch) deleteConsumer() error {
	ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
	defer cancel()
	_, err := w.nc.RequestWithContext(ctx, w.api+"CONSUMER.DELETE."+w.stream+"."+w.name, nil)
	return err
}

// kvEntry is a jetstream.KeyValueEntry delivered by a consumerWatch.
type kvEntry struct {
	bucket, key     string
	value           []byte
	revision, delta uint64
	created         time.Time
	op              jetstream.KeyValueOp
	expiry          bool // an expiry marker of the server (expiryMarker)
}

func (e *kvEntry) Bucket() string                  { return e.bucket }
func (e *kvEntry) Key() string                     { return e.key }
func (e *kvEntry) Value() []byte                   { return e.value }
func (e *kvEntry) Revision() uint64                { return e.revision }
func (e *kvEntry) Created() time.Time              { return e.created }
func (e *kvEntry) Delta() uint64                   { return e.delta }
func (e *kvEntry) Operation() jetstream.KeyValueOp { return e.op }

// expiryMarker reports whether e is an expiry marker of the server, which a
// jetstream.KeyValueEntry cannot tell from a purge.
func (e *kvEntry) expiryMarker() bool { return e.expiry }
