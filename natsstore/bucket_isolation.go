package natsstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	// minIsolationTimeout is the shortest Config.IsolationTimeout.
	minIsolationTimeout = 100 * time.Millisecond
	// maxIsolationBackoff caps how many times longer than usual the store
	// waits before moving again when JetStream stays unreachable after a
	// move (the whole cluster may be down: moving does not help then).
	maxIsolationBackoff = 16
	// isolationProbeShare is the part of Config.IsolationTimeout that the
	// store's requests must have been failing (times the backoff) before
	// the check probes, and the period of its checks.
	isolationProbeShare = 4
	// replicaSilence is how long a stream leader must not have heard from
	// a replica before the probe counts the replica as cut off: the leader
	// hears from its replicas about every second.
	replicaSilence = 3 * time.Second
	// isolationTTLShare scales the isolation timeout down to the shortest
	// lease TTL the store is writing: at most TTL/isolationTTLShare, so
	// that a holder whose renewal went unanswered is moved, and renews
	// through another server, before its renew deadline (TTL minus
	// lease.Config's SafetyMargin and StopTimeout, TTL/10 each by default,
	// from a renewal sent a renew period, TTL/3, after the last success:
	// 0.47 TTL later). At TTL 3 s: 500 ms, leaving 0.9 s for the probe,
	// the move and the renewal.
	isolationTTLShare = 6
	// servedFor is how many of its TTLs the shortest TTL written is kept
	// without a write of it: a lease renewed every TTL/3 at most is
	// written again well within it, while it is held.
	servedFor = 2
)

// isolationTimeout resolves Config.IsolationTimeout for a store that owns
// its connection (Dial) or not; 0 means off.
func (c Config) isolationTimeout(ownConn bool) time.Duration {
	switch {
	case c.IsolationTimeout < 0:
		return 0
	case c.IsolationTimeout > 0:
		return c.IsolationTimeout
	case ownConn:
		return DefaultIsolationTimeout
	default:
		return 0
	}
}

// isolation records how JetStream answers the store's requests. Times are
// monotonic, in nanoseconds since start plus one (0 means none).
type isolation struct {
	start    time.Time
	failed   atomic.Int64 // when the first request that failed since the last success was sent
	moves    atomic.Int64 // moves since the last success, or since a move that led to a working server
	moved    atomic.Int64 // when the store last moved
	answered atomic.Int64 // when the last request that JetStream answered was sent

	inflight atomic.Int64 // requests sent and not yet returned
	sent     atomic.Int64 // when inflight last rose from 0
	returned atomic.Int64 // when a request last returned, or the check started afresh

	ttls  servedTTL // the shortest lease TTL the store writes
	alone bool      // logged that no other server is known (the check's goroutine only)
}

// servedTTL is the shortest lease TTL written recently.
type servedTTL struct {
	mu  sync.Mutex
	ttl time.Duration
	at  int64 // when a lease with ttl was last written
}

func (iso *isolation) now() int64 { return int64(time.Since(iso.start)) + 1 }

func (iso *isolation) at(t time.Time) int64 { return int64(t.Sub(iso.start)) + 1 }

// note records the outcome of a request made with ctx, sent at begin.
//
// A request that went unanswered, or was refused because JetStream is
// unavailable (code 503), fails; so does a write refused as a conflict:
// usually another writer was first, but a server cut off from its cluster
// while it led the bucket's stream refuses every write so, and answers
// reads from what it has, until it steps down. Only what the cluster had to
// agree on (commits: a write acknowledged, a consumer created) ends a
// failure; the probe of watchIsolation decides the rest.
func (iso *isolation) note(ctx context.Context, begin time.Time, err error, commits bool) {
	switch {
	case err == nil && commits:
		iso.healthy()
	case err != nil && isConflict(err):
		iso.fail(begin)
	case jsAnswered(err):
		// An answer, but no proof that the cluster is there: it only
		// shows that a move led to a server that answers (settle).
		iso.answered.Store(iso.at(begin))
	case errors.Is(err, context.Canceled) && !errors.Is(context.Cause(ctx), errCreateTimeout),
		errors.Is(err, errLinkLost),
		errors.Is(err, nats.ErrConnectionClosed),
		errors.Is(err, nats.ErrConnectionReconnecting),
		errors.Is(err, nats.ErrConnectionDraining),
		errors.Is(err, nats.ErrPermissionViolation):
		// The caller gave up, the connection is down (nats.go reconnects
		// by itself), or a permission is missing: no sign of isolation.
	default:
		iso.fail(begin)
	}
}

// sending records a request sent; its return must be recorded with done.
func (iso *isolation) sending() {
	if iso.inflight.Add(1) == 1 {
		iso.sent.Store(iso.now())
	}
}

// done records that a request returned, answered or not.
func (iso *isolation) done() {
	iso.returned.Store(iso.now())
	iso.inflight.Add(-1)
}

// afresh restarts the count of requests in flight without an answer: the
// connection was lost or moved, and nats.go fails what it had in flight.
func (iso *isolation) afresh() {
	iso.failed.Store(0)
	iso.returned.Store(iso.now())
}

// stalledFor returns how long requests have been in flight while none
// returned: since the later of the first of them was sent and the last
// return. A request unanswered counts as failing from its send time,
// before its own timeout (a write is sent again only after 500 ms) says so.
func (iso *isolation) stalledFor() time.Duration {
	if iso.inflight.Load() <= 0 {
		return 0
	}
	return time.Duration(iso.now() - max(iso.sent.Load(), iso.returned.Load()))
}

// serving records a lease written with TTL ttl.
func (iso *isolation) serving(ttl time.Duration) {
	if ttl <= 0 {
		return
	}
	now := iso.now()
	s := &iso.ttls
	s.mu.Lock()
	if s.ttl == 0 || ttl <= s.ttl || now-s.at > int64(servedFor*s.ttl) {
		s.ttl, s.at = ttl, now
	}
	s.mu.Unlock()
}

// shortestTTL returns the shortest lease TTL written within servedFor of
// its TTLs, or 0.
func (iso *isolation) shortestTTL() time.Duration {
	now := iso.now()
	s := &iso.ttls
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ttl == 0 || now-s.at > int64(servedFor*s.ttl) {
		return 0
	}
	return s.ttl
}

// bound is the isolation timeout in effect: configured, scaled down to
// TTL/isolationTTLShare (never below minIsolationTimeout) for the shortest
// lease TTL the store writes.
func (iso *isolation) bound(configured time.Duration) time.Duration {
	if ttl := iso.shortestTTL(); ttl > 0 {
		return min(configured, max(ttl/isolationTTLShare, minIsolationTimeout))
	}
	return configured
}

func (iso *isolation) fail(begin time.Time) {
	iso.failed.CompareAndSwap(0, iso.at(begin))
}

// healthy ends a failure.
func (iso *isolation) healthy() {
	iso.failed.Store(0)
	iso.moves.Store(0)
}

// unansweredFor returns how long the store's requests have been failing,
// or in flight without an answer (stalledFor), or 0.
func (iso *isolation) unansweredFor() time.Duration {
	stalled := iso.stalledFor()
	f := iso.failed.Load()
	if f == 0 {
		return stalled
	}
	return max(stalled, time.Duration(iso.now()-f))
}

// backoff is how many times longer than usual the store waits before it
// moves, after moves that did not lead to a working server.
func (iso *isolation) backoff() time.Duration {
	return time.Duration(min(int64(1)<<min(iso.moves.Load(), 4), maxIsolationBackoff))
}

// probeDue returns how long the store's requests have been failing, and
// whether that is long enough to probe: bound/isolationProbeShare times
// the backoff.
func (iso *isolation) probeDue(bound time.Duration) (time.Duration, bool) {
	silent := iso.unansweredFor()
	return silent, silent > 0 && silent >= bound/isolationProbeShare*iso.backoff()
}

// movesOn reports whether the store moves to another server after its
// requests have been failing for silent and the probe found err (not nil).
// A probe answered by a stream leader cut off from its replicas shows that
// this server reaches only the minority side of a partition: the store
// moves at once. No answer or no leader shows no more than that the
// stream is out of reach: the whole stream may be electing a leader, and
// moving may land on a server cut off from the cluster, so the store
// moves only once its requests have been failing for bound times the
// backoff.
func (iso *isolation) movesOn(bound, silent time.Duration, err error) bool {
	var cut *cutOffLeader
	return errors.As(err, &cut) || silent >= bound*iso.backoff()
}

// moving records a move.
func (iso *isolation) moving() {
	iso.afresh()
	iso.moves.Add(1)
	iso.moved.Store(iso.now())
}

// settle ends the backoff once a move has led to a server that answers:
// a request sent after the move was answered, none failed since, and
// bound has passed. A store that only reads never commits, and would
// otherwise keep the backoff of an old move for its next failure.
func (iso *isolation) settle(bound time.Duration) {
	moved := iso.moved.Load()
	if iso.moves.Load() > 0 && iso.failed.Load() == 0 && iso.answered.Load() > moved &&
		iso.now()-moved >= int64(bound) {
		iso.moves.Store(0)
	}
}

// jsAnswered reports whether err (nil included) is an answer of JetStream,
// as opposed to a request that went unanswered or was refused because
// JetStream is unavailable (code 503) on this server.
func jsAnswered(err error) bool {
	if err == nil || errors.Is(err, jetstream.ErrMsgNotFound) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.Code != http.StatusServiceUnavailable
	}
	var legacy *nats.APIError // a watch's creation goes through nats.go's older API
	if errors.As(err, &legacy) {
		return legacy.Code != http.StatusServiceUnavailable
	}
	return false
}

// notingKV is a keyValue that records in iso how JetStream answers.
type notingKV struct {
	keyValue
	iso *isolation
}

func (k notingKV) PublishMsg(ctx context.Context, m *nats.Msg) (*jetstream.PubAck, error) {
	k.iso.serving(heldTTL(m.Data))
	begin := time.Now()
	k.iso.sending()
	ack, err := k.keyValue.PublishMsg(ctx, m)
	k.iso.done()
	k.iso.note(ctx, begin, err, true)
	return ack, err
}

func (k notingKV) GetLastMsgForSubject(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	begin := time.Now()
	k.iso.sending()
	m, err := k.keyValue.GetLastMsgForSubject(ctx, subject)
	k.iso.done()
	k.iso.note(ctx, begin, err, false)
	return m, err
}

func (k notingKV) Watch(ctx context.Context, filter string) (jetstream.KeyWatcher, error) {
	begin := time.Now()
	k.iso.sending()
	w, err := k.keyValue.Watch(ctx, filter)
	k.iso.done()
	k.iso.note(ctx, begin, err, true)
	return w, err
}

// heldTTL returns the TTL of a held record of version 2 or 3 (its sixth
// field, in milliseconds), or 0 for any other value: it reads a record
// this package encoded, without allocating.
func heldTTL(b []byte) time.Duration {
	const held = " held "
	rest, ok := bytes.CutPrefix(b, []byte(recordVersion+held))
	if !ok {
		if rest, ok = bytes.CutPrefix(b, []byte(recordVersionV3+held)); !ok {
			return 0
		}
	}
	// owner, term and token come first.
	for range 3 {
		i := bytes.IndexByte(rest, ' ')
		if i < 0 {
			return 0
		}
		rest = rest[i+1:]
	}
	if i := bytes.IndexByte(rest, ' '); i >= 0 {
		rest = rest[:i]
	}
	if len(rest) == 0 || len(rest) > 10 {
		return 0
	}
	var ms int64
	for _, c := range rest {
		if c < '0' || c > '9' {
			return 0
		}
		ms = ms*10 + int64(c-'0')
	}
	return time.Duration(ms) * time.Millisecond
}

// watchIsolation starts the isolation check when Config.IsolationTimeout
// applies. Its bound is that timeout, scaled down to a sixth of the
// shortest lease TTL the store writes (isolation.bound). When the store's
// requests have been failing, or in flight without an answer, for bound/4
// while connected, it asks for the bucket's stream information
// (probeStream), and again every bound/4 while they fail. When that shows
// the stream out of reach through this server and the connection knows
// other servers, it reconnects to another one: at once when the answer
// comes from a stream leader cut off from its replicas, once the requests
// have been failing for bound otherwise (movesOn), each time longer after
// moves that did not help (backoff, settle). api is the JetStream API
// prefix, ending with '.'. It costs no request while the store's requests
// succeed, and one per bound/4 at most while they fail.
func (bc *bucketChecks) watchIsolation(api string) {
	configured := bc.cfg.isolationTimeout(bc.ownConn)
	if configured <= 0 || bc.nc == nil {
		return
	}
	iso := &bc.health.isolation
	iso.start = time.Now()
	bc.kv = notingKV{keyValue: bc.kv, iso: iso}
	subject := api + "STREAM.INFO.KV_" + bc.bucket
	c := &isolationCheck{iso: iso, configured: configured, life: bc.life,
		connected: func() bool { return bc.nc.Status() == nats.CONNECTED },
		probe:     func(ctx context.Context) error { return bc.probeStream(ctx, subject, replicaSilence) },
		move:      bc.leaveServer}
	bc.goroutines.Add(1)
	go func() {
		defer bc.goroutines.Done()
		c.run()
	}()
}

// isolationCheck is the state of watchIsolation's goroutine; its I/O is
// in the functions it is given, so that tests can run it in virtual time.
type isolationCheck struct {
	iso        *isolation
	configured time.Duration   // Config.IsolationTimeout resolved
	life       context.Context // the store's
	connected  func() bool
	probe      func(context.Context) error
	move       func(silent time.Duration, err error) // leaves the server (bucketChecks.leaveServer)
}

// run checks every bound/4 until life ends.
func (c *isolationCheck) run() {
	tick := time.NewTimer(c.iso.bound(c.configured) / isolationProbeShare)
	defer tick.Stop()
	for {
		select {
		case <-c.life.Done():
			return
		case <-tick.C:
		}
		c.step()
		tick.Reset(c.iso.bound(c.configured) / isolationProbeShare)
	}
}

// step is one tick of the check: 1. judge only while connected; 2. probe
// once the requests have failed long enough; 3. move if the probe's
// finding, and how long they have failed by its end, say so.
func (c *isolationCheck) step() {
	iso := c.iso
	if !c.connected() {
		iso.afresh() // nats.go reconnects; judge the next server afresh
		return
	}
	bound := iso.bound(c.configured)
	iso.settle(bound)
	if _, due := iso.probeDue(bound); !due {
		return
	}
	ctx, cancel := context.WithTimeout(c.life, bound/2)
	err := c.probe(ctx)
	cancel()
	if c.life.Err() != nil {
		return
	}
	if err == nil {
		// The stream answers through this server: its requests failed
		// for another reason (lost races to other writers, or reads
		// refused with 503 while the cluster elects its JetStream meta
		// leader, as every server without one refuses them: moving would
		// not help). A leader cut off less than replicaSilence ago still
		// looks in touch with its replicas: such an answer ends the
		// failure only once it has lasted that long, so that the next
		// probe can tell.
		if iso.unansweredFor() >= replicaSilence {
			iso.healthy()
		}
		return
	}
	silent := iso.unansweredFor()
	if !iso.movesOn(bound, silent, err) {
		// Short of the timeout by less than a probe's wait: wait for it
		// rather than for the next tick and probe, if nothing is answered
		// meanwhile (a move then comes at most the timeout after the
		// first request that went unanswered was sent).
		wait := bound*iso.backoff() - silent
		if wait > bound/2 || !c.sleep(wait) {
			return
		}
		if silent = iso.unansweredFor(); !iso.movesOn(bound, silent, err) {
			return
		}
	}
	c.move(silent, err)
}

// sleep waits for d, and reports false if the store closed meanwhile.
func (c *isolationCheck) sleep(d time.Duration) bool {
	return sleep(c.life, d)
}

// leaveServer reconnects to another server, if the connection knows one.
func (bc *bucketChecks) leaveServer(silent time.Duration, err error) {
	iso := &bc.health.isolation
	server := bc.nc.ConnectedUrlRedacted()
	if len(bc.nc.Servers()) < 2 {
		if !iso.alone {
			iso.alone = true
			bc.log.Warn("natsstore: JetStream is unreachable through the only server this connection knows",
				"server", server, "for", silent, "err", err)
		}
		return
	}
	iso.alone = false
	ev := ServerIsolated{Bucket: bc.bucket, Server: server, Unavailable: silent, Reason: err.Error()}
	bc.log.Warn("natsstore: JetStream is unreachable through this server; reconnecting to another",
		"server", server, "for", silent, "err", err)
	bc.emit(ev)
	iso.moving()
	if err := bc.nc.ForceReconnect(); err != nil {
		bc.log.Warn("natsstore: reconnecting to another server failed", "err", err)
	}
}

// probeStream asks for the bucket's stream information, which the stream
// leader answers. It returns nil when the answer shows a stream that can
// commit: one with a leader that has heard from a majority of its replicas
// within silence. No answer, no leader, or an answer from a leader cut off
// from its replicas (it goes on answering until it steps down: a
// *cutOffLeader) is an error.
func (c *storeConn) probeStream(ctx context.Context, subject string, silence time.Duration) error {
	resp, err := c.nc.RequestWithContext(ctx, subject, nil)
	if err != nil {
		return err
	}
	var r struct {
		Error   *jetstream.APIError    `json:"error,omitempty"`
		Cluster *jetstream.ClusterInfo `json:"cluster,omitempty"`
	}
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return nil // an answer all the same
	}
	switch {
	case r.Error != nil && r.Error.Code == http.StatusServiceUnavailable:
		return r.Error
	case r.Error != nil || r.Cluster == nil:
		return nil // answered: the bucket is gone, or JetStream is not clustered
	case r.Cluster.Leader == "":
		return errors.New("the bucket's stream has no leader that this server can reach")
	}
	heard := 1 // the leader
	for _, p := range r.Cluster.Replicas {
		if p != nil && !p.Offline && p.Active < silence {
			heard++
		}
	}
	if quorum := (len(r.Cluster.Replicas)+1)/2 + 1; heard < quorum {
		return &cutOffLeader{leader: r.Cluster.Leader, silence: silence}
	}
	return nil
}

// cutOffLeader is a probe's answer from a stream leader that has not heard
// from a majority of its replicas: one cut off from its cluster, and the
// only leader the store's server reaches.
type cutOffLeader struct {
	leader  string
	silence time.Duration
}

func (e *cutOffLeader) Error() string {
	return fmt.Sprintf("the bucket's stream leader %s has not heard from a majority of its replicas for %v",
		e.leader, e.silence)
}
