package natsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/asterforge/aster/lease"
)

// Store keeps leases in a JetStream KV bucket. It implements lease.Store and
// lease.Watcher and is safe for concurrent use. Open one with New, NewConn or
// Dial, and Close it when done.
type Store struct {
	cfg Config
	log *slog.Logger
	storeConn
	openedBucket
	keyBook
	upkeep
	storeLife
	bucketChecks bucketChecks // the checks of the bucket and of the server (bucket_check.go, bucket_isolation.go)
	watches      watches      // Watch, WatchPrefix and the KV watches under them (watch_*.go)
	writes       writes       // the write path and the reads and judgements it rests on (write_*.go, keys_*.go)
}

// storeConn is the store's connection to the server.
type storeConn struct {
	nc      *nats.Conn // nil only in tests with a fake keyValue
	ownConn bool       // Dial made nc; Close closes it
	js      jetstream.JetStream
	kv      keyValue
	// link is cancelled when the connection is lost and replaced when it
	// is back: requests in flight when the connection drops fail at once
	// instead of waiting for their deadline (see guard).
	link atomic.Pointer[link]
	// hintsRefused: the server refused a subscription to the keys (watch_hint.go).
	hintsRefused atomic.Bool
}

// openedBucket is the bucket as the store opened it, compared by every
// check.
type openedBucket struct {
	bucket      string
	subject     string        // "$KV.<bucket>.": where keys are stored
	putPrefix   string        // where keys are written: subject, behind the API prefix if any
	mode        atomic.Uint32 // ExpiryServer or ExpiryObserved; server falls back to observed
	markerTTL   time.Duration // TTL of release markers in server mode
	created     time.Time     // the stream's creation time
	maxTTL      time.Duration // the bucket's maximum lease TTL: how long a vanished key stays taken
	maxRecorded bool          // the bucket records maxTTL (stream metadata)
	claimMax    time.Duration // the longest TTL a claim may have
	replicas    int           // the bucket's replicas: reads of more than one are confirmed (write_current.go)
	infoSubject string        // "$JS.API.STREAM.INFO.KV_<bucket>", with the domain or API prefix
	// directPrefix is "$JS.API.DIRECT.GET.KV_<bucket>.", with the domain
	// or API prefix: a key's subject after it asks any replica (write_direct.go).
	directPrefix string
}

// keyBook is what the store knows of the keys, which the take decision
// (natsstore/internal/expiry) rests on.
type keyBook struct {
	keys    *keyCache
	flights flights       // Acquires in progress, by key (write_flight.go)
	top     atomic.Uint64 // the highest stream revision seen
	behind  staleReads    // reads that showed a revision below one seen (write_stale.go)
}

// upkeep is the state of the store's checks of its bucket and of its
// server (bucketChecks).
type upkeep struct {
	broken atomic.Pointer[BucketError] // why the store stopped, nil while it works
	checks checker
	pokes  chan struct{} // asks the monitor for a check
	health health        // watch creation times, failing requests (watch_liveness.go, bucket_isolation.go)
}

// storeLife is the store's lifetime: its watches and its Close.
type storeLife struct {
	life       context.Context // lifetime of watches, cancelled by Close
	stop       context.CancelFunc
	mu         sync.Mutex // guards closed with goroutines.Add
	closed     atomic.Bool
	goroutines sync.WaitGroup // every goroutine of the store
	running    atomic.Int64   // watches (and their teardowns) not yet stopped
	once       sync.Once
	err        error // Close's answer
}

// watches is the store's Watch and WatchPrefix calls and the KV watches
// under them (watch_*.go). It holds the parts of the store it uses, and,
// as functions, what it needs of the write path (writes), which also
// records in the key book what a watch delivered.
type watches struct {
	*storeConn
	*openedBucket
	*storeLife
	cfg    *Config
	log    *slog.Logger
	health *health  // watch creation times (the upkeep's)
	hub    watchHub // Watch calls of one key share one watch run (watch_hub.go)
	// replicated: the store confirms its reads (writes.replicated), and a
	// watch's initial state waits for the stream leader's last revision.
	replicated bool
	// read returns a key's last message (writes.read).
	read func(ctx context.Context, deadline time.Time, key string) (*jetstream.RawStreamMsg, error)
	// fail translates the error of a failed watch creation (writes.fail).
	fail func(ctx context.Context, what string, err error) error
	// watched records what a watch delivered in the key book (writes.watched).
	watched func(e jetstream.KeyValueEntry)
	// emit hands an event to Config.OnEvent (writes.emit).
	emit func(ev Event)
}

// bucketChecks is the store's checks of its bucket and of its server
// (bucket_check.go, bucket_isolation.go), which may stop the store or move
// it to another server. It holds the parts of the store it reads and the
// upkeep's state, and, as functions, what it needs of the write path
// (writes, which holds the bucket checks in turn).
type bucketChecks struct {
	*upkeep
	*storeConn
	*openedBucket
	*keyBook
	*storeLife
	cfg *Config
	log *slog.Logger
	// resending sends a request again while the stream does not answer (writes.resending).
	resending func(actx context.Context, try func(context.Context) error) (resent bool, err error)
	// current confirms a read with the stream leader (writes.current).
	current func(ctx context.Context, deadline time.Time, what string, r readMark) error
	// regressedRead judges a read below a revision seen (writes.regressedRead).
	regressedRead func(what, key string, highest, got uint64) error
	// fail translates the error of a failed operation (writes.fail).
	fail func(ctx context.Context, what string, err error) error
	// emit hands an event to Config.OnEvent (writes.emit).
	emit func(ev Event)
}

// checksOf returns the bucket checks over the parts of s.
func checksOf(s *Store) bucketChecks {
	return bucketChecks{upkeep: &s.upkeep, storeConn: &s.storeConn, openedBucket: &s.openedBucket, keyBook: &s.keyBook,
		storeLife: &s.storeLife, cfg: &s.cfg, log: s.log,
		resending: s.writes.resending, current: s.writes.current, regressedRead: s.writes.regressedRead,
		fail: s.writes.fail, emit: s.writes.emit}
}

// writes is the store's write path (write_*.go): Acquire, AcquireUnder,
// Renew and Release, their compare-and-swap loops, the reads they rest on
// and the judgement of what they read (keys_judge.go, keys_session.go,
// keys_observe.go's watched), with the translation of their errors
// (errors.go) and events (events.go). It holds the parts of the store it
// uses, the bucket checks among them (through which it reads the upkeep's
// state).
type writes struct {
	*storeConn
	*openedBucket
	*keyBook
	*upkeep
	*storeLife
	*bucketChecks
	cfg *Config
	log *slog.Logger
}

// writesOf returns the write path over the parts of s.
func writesOf(s *Store) writes {
	return writes{storeConn: &s.storeConn, openedBucket: &s.openedBucket, keyBook: &s.keyBook, upkeep: &s.upkeep,
		storeLife: &s.storeLife, bucketChecks: &s.bucketChecks, cfg: &s.cfg, log: s.log}
}

var (
	_ lease.Store   = (*Store)(nil)
	_ lease.Watcher = (*Store)(nil)
)

// New opens a Store over an existing JetStream context, binding to or
// creating cfg.Bucket. The caller keeps the connection: Close does not close
// it, and cfg.Domain and cfg.APIPrefix are ignored. Create the connection with
// nats.ReconnectBufSize(-1) so that operations fail fast while disconnected.
func New(ctx context.Context, js jetstream.JetStream, cfg Config) (*Store, error) {
	if js == nil {
		return nil, &lease.FieldError{Field: "js", Reason: "must not be nil"}
	}
	return open(ctx, js, cfg, false)
}

// NewConn opens a Store over an existing connection, with a JetStream
// context for cfg.Domain or cfg.APIPrefix if set. The caller keeps ownership
// of nc: Close does not close it.
func NewConn(ctx context.Context, nc *nats.Conn, cfg Config) (*Store, error) {
	if nc == nil {
		return nil, &lease.FieldError{Field: "nc", Reason: "must not be nil"}
	}
	js, err := newJetStream(nc, cfg)
	if err != nil {
		return nil, err
	}
	return open(ctx, js, cfg, false)
}

func newJetStream(nc *nats.Conn, cfg Config) (jetstream.JetStream, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var (
		js  jetstream.JetStream
		err error
	)
	switch {
	case cfg.Domain != "":
		js, err = jetstream.NewWithDomain(nc, cfg.Domain)
	case cfg.APIPrefix != "":
		js, err = jetstream.NewWithAPIPrefix(nc, cfg.APIPrefix)
	default:
		js, err = jetstream.New(nc)
	}
	if err != nil {
		return nil, fmt.Errorf("natsstore: JetStream context: %w", err)
	}
	return js, nil
}

func open(ctx context.Context, js jetstream.JetStream, cfg Config, ownConn bool) (*Store, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.timeout())
		defer cancel()
	}
	if cfg.conn == nil { // New and NewConn: permissions judged as Dial's connection judges them
		cfg.conn = newConnState(cfg)
	}
	log := cfg.logger()
	nc := js.Conn()
	if !ownConn && nc.Opts.ReconnectBufSize >= 0 {
		log.Warn("natsstore: the connection buffers writes while disconnected; operations will wait for their " +
			"deadline instead of failing fast, and may land after the reconnect; use nats.ReconnectBufSize(-1)")
	}

	var st bucketState
	err := failFast(ctx, nc, func(ctx context.Context) error {
		var err error
		st, err = openBucket(ctx, js, cfg, log)
		return err
	})
	if err != nil {
		return nil, explain(ctx, nc, openError(cfg, err))
	}

	name := cfg.bucket()
	prefix := apiPrefix(js)
	heartbeat, silence := cfg.watchHeartbeat()
	kv := &jsBucket{
		Publisher:     js,
		nc:            nc,
		msgGet:        prefix + "STREAM.MSG.GET.KV_" + name,
		api:           prefix,
		bucket:        name,
		stream:        "KV_" + name,
		pre:           "$KV." + name + ".",
		heartbeat:     heartbeat,
		silence:       silence,
		deleteTimeout: cfg.timeout(),
	}
	s := &Store{
		cfg:       cfg,
		log:       log.With("bucket", name),
		storeConn: storeConn{nc: nc, ownConn: ownConn, js: js, kv: kv},
		openedBucket: openedBucket{
			bucket:       name,
			subject:      "$KV." + name + ".",
			markerTTL:    time.Duration(st.markerTTL) * time.Second,
			created:      st.facts.created,
			maxTTL:       st.maxTTL,
			maxRecorded:  st.maxRecorded,
			claimMax:     st.claimMax,
			replicas:     st.replicas,
			infoSubject:  prefix + "STREAM.INFO.KV_" + name,
			directPrefix: prefix + "DIRECT.GET.KV_" + name + ".",
		},
		keyBook: keyBook{keys: newKeyCache(time.Now)},
		upkeep:  upkeep{checks: checker{slot: make(chan struct{}, 1)}, pokes: make(chan struct{}, 1)},
	}
	s.mode.Store(uint32(st.mode))
	s.sawRevision(st.facts.lastSeq)
	s.putPrefix = s.subject
	if prefix != jetstream.DefaultAPIPrefix {
		s.putPrefix = prefix + s.subject
	}
	s.life, s.stop = context.WithCancel(context.Background())
	s.writes = writesOf(s)
	s.watches = watches{storeConn: &s.storeConn, openedBucket: &s.openedBucket, storeLife: &s.storeLife,
		cfg: &s.cfg, log: s.log, health: &s.health, replicated: s.writes.replicated(),
		read: s.writes.read, fail: s.writes.fail, watched: s.writes.watched, emit: s.writes.emit}
	s.bucketChecks = checksOf(s)
	s.followConn()
	s.bucketChecks.watchIsolation(prefix)

	// Probe the subjects every operation uses, so that a user without
	// permission learns it now, clearly, and not as a timeout later.
	if err := failFast(ctx, nc, s.probe); err != nil {
		s.stop()
		s.goroutines.Wait() // followConn's goroutine
		return nil, explain(ctx, nc, err)
	}
	s.opened(ctx, st)
	s.bucketChecks.monitor()
	s.log.Debug("natsstore: opened", "expiry", s.Expiry(), "replicas", st.replicas, "max_ttl", s.maxTTL)
	return s, nil
}

// opened reports what opening the bucket found: a bucket it created, a
// fallback to observed expiry, guarantees the bucket weakens.
func (s *Store) opened(ctx context.Context, st bucketState) {
	if st.created {
		domain := st.facts.domain
		if domain == "" {
			domain = "(default)"
		}
		s.log.Warn("natsstore: created the missing bucket; in production a missing bucket usually means a wrong "+
			"account, JetStream domain or bucket name, and instances on different buckets do not exclude each other: "+
			"create the bucket once (CreateBucket) and set Config.NoCreate", "domain", domain,
			"account", accountName(ctx, s.nc), "replicas", st.replicas, "max_ttl", s.maxTTL, "expiry", st.mode)
		s.writes.emit(BucketCreated{Bucket: s.bucket, Domain: st.facts.domain, Replicas: st.replicas})
	}
	if st.fallback != "" {
		s.log.Warn("natsstore: " + st.fallback + "; expiry is judged by contenders watching for an unchanged revision " +
			"for a lease's TTL, and watchers do not see expiries")
		s.writes.emit(ExpiryFallback{Bucket: s.bucket, Reason: st.fallback})
	}
	for _, why := range st.degraded {
		s.log.Warn("natsstore: " + why)
		s.writes.emit(BucketDegraded{Bucket: s.bucket, Reason: why})
	}
}

// accountName asks the server which account the connection uses, for the
// log; it returns "unknown" when the server does not say in time (servers
// before 2.10, or a user who may not ask).
func accountName(ctx context.Context, nc *nats.Conn) string {
	if nc == nil {
		return "unknown"
	}
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	msg, err := nc.RequestWithContext(ctx, "$SYS.REQ.USER.INFO", nil)
	if err != nil {
		return "unknown"
	}
	var resp struct {
		Data struct {
			Account     string `json:"account"`
			AccountName string `json:"account_name"`
		} `json:"data"`
	}
	switch {
	case json.Unmarshal(msg.Data, &resp) != nil || resp.Data.Account == "":
		return "unknown"
	case resp.Data.AccountName != "" && resp.Data.AccountName != resp.Data.Account:
		return resp.Data.AccountName + " (" + resp.Data.Account + ")"
	}
	return resp.Data.Account
}

// probeKey is a key no lease should use; the probe never writes it.
const probeKey = "_aster_natsstore_probe"

// probe reads a key and publishes to it with an expected revision it cannot
// have: the server answers both (not found, wrong last sequence) without
// writing, which shows that this user may read and write the bucket.
func (s *Store) probe(ctx context.Context) error {
	_, err := s.kv.GetLastMsgForSubject(ctx, s.subject+probeKey)
	if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("natsstore: read from bucket %q: %w", s.bucket, err)
	}
	_, err = s.kv.PublishMsg(ctx, &nats.Msg{Subject: s.putPrefix + probeKey, Header: writeHeader(kindHeld, 1<<62, 0)})
	if err != nil && !isConflict(err) {
		return fmt.Errorf("natsstore: write to bucket %q: %w", s.bucket, err)
	}
	return nil
}

// failFast runs fn, cancelling it as soon as the server reports a
// permissions violation on nc: the server drops a request it does not
// permit, and the request would otherwise wait for its deadline.
func failFast(ctx context.Context, nc *nats.Conn, fn func(context.Context) error) error {
	before := nc.LastError()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if err := nc.LastError(); err != nil && err != before && errors.Is(err, nats.ErrPermissionViolation) &&
					!hintRefusal(err) {
					cancel(fmt.Errorf("%w: %v", ErrPermission, err))
					return
				}
			}
		}
	})
	err := fn(ctx)
	close(done)
	wg.Wait()
	if cause := context.Cause(ctx); cause != nil && errors.Is(cause, ErrPermission) {
		return cause
	}
	return err
}

// explain adds what an open error means for the user.
func explain(ctx context.Context, nc *nats.Conn, err error) error {
	switch {
	case errors.Is(err, ErrPermission), errors.Is(err, ErrBucketConfig), errors.Is(err, ErrNoBucket),
		errors.Is(err, lease.ErrInvalid):
		return err
	}
	if perm := permissionDenied(nc, err); perm != nil {
		return fmt.Errorf("%w (while: %v)", perm, err)
	}
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w (is JetStream enabled and reachable, and may this user use the bucket?)",
			lease.ErrUnavailable, err)
	}
	return err
}

// Bucket returns the name of the store's KV bucket.
func (s *Store) Bucket() string { return s.bucket }

// Expiry returns how the store judges expiry: ExpiryServer or
// ExpiryObserved. A store in ExpiryServer mode falls back to ExpiryObserved
// when a check finds that the server or the bucket lost per-message TTLs
// (unless Config.Expiry is ExpiryServer, when it stops instead).
func (s *Store) Expiry() ExpiryMode { return s.expiry() }

// expiry is how the store judges expiry now (Store.Expiry).
func (b *openedBucket) expiry() ExpiryMode { return ExpiryMode(b.mode.Load()) }

// releaseTTL returns the TTL of release markers: the bucket's marker TTL in
// server mode, none in observed mode.
func (b *openedBucket) releaseTTL() time.Duration {
	if b.expiry() != ExpiryServer {
		return 0
	}
	return b.markerTTL
}

// Close stops every watch (closing their channels), closes the connection
// if Dial made it, and makes every later call return lease.ErrClosed. It is
// idempotent and waits at most Config.CloseTimeout; it returns an error
// saying what did not stop in time. Leases are not released: they expire.
func (s *Store) Close() error {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed.Store(true)
		s.mu.Unlock()
		s.stop()
		done := make(chan struct{})
		go func() { s.goroutines.Wait(); close(done) }()
		timer := time.NewTimer(s.cfg.closeTimeout())
		defer timer.Stop()
		select {
		case <-done:
		case <-timer.C:
			// A watch's stop deletes its consumer with a request; without the
			// $JS.API.CONSUMER.DELETE permission it waits for its timeout.
			if n := s.running.Load(); n > 0 {
				s.err = fmt.Errorf("natsstore: %d watches did not stop within %v (does the user lack "+
					"permission for $JS.API.CONSUMER.DELETE?)", n, s.cfg.closeTimeout())
			}
		}
		if s.ownConn && s.nc != nil {
			s.nc.Close()
		}
	})
	return s.err
}

// link is one period of connection.
type link struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// errLinkLost explains a request cut short because the connection was lost.
var errLinkLost = errors.New("natsstore: connection to NATS lost while waiting for the answer")

// followConn keeps s.link in step with the connection's status until the
// store closes.
func (s *Store) followConn() {
	status := s.nc.StatusChanged(nats.CONNECTED, nats.DISCONNECTED, nats.RECONNECTING, nats.CLOSED)
	s.setLink(s.nc.Status() == nats.CONNECTED)
	s.goroutines.Add(1)
	go func() {
		defer s.goroutines.Done()
		defer s.nc.RemoveStatusListener(status)
		for {
			select {
			case <-s.life.Done():
				return
			case st := <-status:
				s.setLink(st == nats.CONNECTED)
			}
		}
	}()
}

// setLink ends the current link and starts a new one when up.
func (c *storeConn) setLink(up bool) {
	l := &link{}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	if !up {
		l.cancel()
	}
	if old := c.link.Swap(l); old != nil {
		old.cancel()
	}
}

// guard bounds one request: it may use the part of the time left until
// deadline given by share (in quarters), so that the caller has time left to
// resolve an indeterminate outcome, and it ends as soon as the connection is
// lost. It costs one timer. Call the returned guarded's end when the request
// is over.
func (c *storeConn) guard(ctx context.Context, deadline time.Time, share int) guarded {
	if share < 4 {
		left := time.Until(deadline)
		deadline = deadline.Add(-left / 4 * time.Duration(4-share))
	}
	var g guarded
	g.ctx, g.cancel = context.WithDeadline(ctx, deadline)
	if l := c.link.Load(); l != nil {
		g.stop = context.AfterFunc(l.ctx, g.cancel)
	}
	return g
}

// guarded is a request's context made by guard.
type guarded struct {
	ctx    context.Context
	cancel context.CancelFunc
	stop   func() bool
}

func (g guarded) end() {
	if g.stop != nil {
		g.stop()
	}
	g.cancel()
}

// begin checks a call's common preconditions and returns its deadline:
// ctx's, or the store's Timeout from now when ctx has none.
func (w *writes) begin(ctx context.Context) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	if w.closed.Load() {
		return time.Time{}, lease.ErrClosed
	}
	if be := w.broken.Load(); be != nil {
		return time.Time{}, be
	}
	if deadline, ok := ctx.Deadline(); ok {
		return deadline, nil
	}
	return time.Now().Add(w.cfg.timeout()), nil
}
