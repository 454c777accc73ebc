package natsstore

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	// minWatchCheckInterval is the shortest Config.WatchCheckInterval.
	minWatchCheckInterval = 50 * time.Millisecond
	// rewatchAttempt bounds one attempt to re-create a watch: a consumer
	// creation the server does not answer (a stream without a leader) is
	// given up and retried, so that the watch is back soon after the stream
	// has a leader again. It grows to ten times the last creation when
	// creations are slow, and never exceeds Config.Timeout.
	rewatchAttempt = time.Second
)

// health is what the store learned about its watches and about JetStream's
// reachability, shared by its goroutines.
type health struct {
	createdIn atomic.Int64 // how long the last watch creation took, in nanoseconds
	isolation isolation    // see bucket_isolation.go
}

func (c Config) watchCheck() time.Duration {
	switch {
	case c.WatchCheckInterval < 0:
		return 0
	case c.WatchCheckInterval == 0:
		return DefaultWatchCheckInterval
	default:
		return c.WatchCheckInterval
	}
}

// attemptLimit bounds one attempt to re-create a watch.
func (ws *watches) attemptLimit() time.Duration {
	limit := max(rewatchAttempt, 10*time.Duration(ws.health.createdIn.Load()))
	return min(limit, ws.cfg.timeout())
}

// watchRun keeps the KV watch of one Watch or WatchPrefix call alive and
// forwards its updates: it re-creates the watch after a reconnect or when it
// ends, checks every interval that it has delivered the last revision of
// its key (or under its prefix), and reports a watch that was silent for
// longer than it should be.
type watchRun struct {
	ws       *watches
	key      string        // the key watched, or a prefix followed by ">"
	out      watchOutput   // where its entries go
	interval time.Duration // of the liveness check; 0 when disabled
	stallAt  time.Duration // a watch lost for this long is reported
	watchNow
	leaderCatchUp
	liveCheck
	rewatch
	hintFollow
}

// watchNow is the watch in use.
type watchNow struct {
	w       *keyWatch // nil while it is being re-created
	gen     uint64    // counts the watches made, to match check results
	initial bool      // w has not delivered the key's initial state yet
	seen    bool      // w delivered an entry of the initial state
	rev     uint64    // the highest revision w delivered
}

// leaderCatchUp: the initial state of a watch of a replicated bucket is
// complete once w has delivered leaderRev as well as its own end of
// initial data (see settle).
type leaderCatchUp struct {
	ownDone       bool   // w sent its end of initial data
	leaderRev     uint64 // the lowest last revision a read for w showed
	leaderKnown   bool   // a read for w answered
	leaderReading bool   // such a read is in flight
	leaderRead    chan checkResult
	leaderRetry   *time.Timer   // the next such read
	leaderPause   time.Duration // the pause before it
}

// liveCheck is the liveness check of the watch in use.
type liveCheck struct {
	check     *time.Timer // the next liveness check, or the end of a grace
	reading   bool        // a check's read is in flight
	checked   chan checkResult
	pending   uint64    // a revision a check read that w had not delivered
	pendingAt time.Time // when that check was sent
}

// rewatch is a silence of the watch and its re-creation.
type rewatch struct {
	lostAt   time.Time // since when the watch is known silent; zero while it works
	cause    string    // the likely cause of the silence
	reported bool      // WatchStalled was sent for this silence
	retry    *time.Timer
	pause    time.Duration
	creating bool         // a new watch is being made
	again    bool         // the connection came back meanwhile: make it again
	created  chan created // its outcome
}

// hintFollow: while the watch is down, its keys are followed through
// their writes (watch_hint.go).
type hintFollow struct {
	hint        *hints            // nil while the watch works
	hintGen     uint64            // counts the subscriptions, to match reads
	hintReading bool              // a read of written keys is in flight
	hintsRead   chan hintRead     // its outcome
	hintFloor   uint64            // the highest revision the lost watches delivered
	hintRevs    map[string]uint64 // the revisions delivered since, by key
}

// endingWatch is a watch that ends by itself, saying why (consumerWatch).
type endingWatch interface {
	ended() (heard time.Time, err error)
}

// checkResult is the answer of a liveness check's read.
type checkResult struct {
	gen uint64
	rev uint64
	at  time.Time
	err error
}

func (ws *watches) newWatchRun(key string, out watchOutput) *watchRun {
	r := &watchRun{
		ws:            ws,
		key:           key,
		out:           out,
		interval:      ws.cfg.watchCheck(),
		leaderCatchUp: leaderCatchUp{leaderRead: make(chan checkResult, 1)},
		liveCheck:     liveCheck{checked: make(chan checkResult, 1)},
		rewatch:       rewatch{pause: rewatchMin, created: make(chan created, 1)},
		hintFollow:    hintFollow{hintsRead: make(chan hintRead, 1)},
	}
	r.stallAt = r.interval
	if r.stallAt == 0 {
		r.stallAt = DefaultWatchCheckInterval
	}
	return r
}

// run forwards the updates of w, and of the watches that replace it, until
// ctx is done.
func (r *watchRun) run(ctx context.Context, w *keyWatch, reconnected <-chan nats.Status) {
	r.startTimers()
	defer r.stop()
	r.use(ctx, w)
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-r.updates():
			if !ok {
				r.watchEnded()
				continue
			}
			r.deliver(e)
		case <-reconnected:
			r.afterReconnect(ctx)
		case <-r.retry.C:
			r.recreate(ctx)
		case c := <-r.created:
			r.creating = false
			r.made(ctx, c)
		case <-r.check.C:
			r.checkDue(ctx)
		case <-r.hintWake():
			r.readHints(ctx)
		case res := <-r.hintsRead:
			r.hintReading = false
			r.deliverHints(res)
			r.readHints(ctx) // the keys written meanwhile
		case res := <-r.checked:
			r.checkAnswered(res)
		case <-r.leaderRetry.C:
			r.readLeaderRev(ctx)
		case res := <-r.leaderRead:
			r.leaderReading = false
			r.leaderRevAnswered(ctx, res)
		}
	}
}

// startTimers makes run's timers, stopped.
func (r *watchRun) startTimers() {
	r.check = time.NewTimer(time.Hour)
	r.check.Stop()
	r.retry = time.NewTimer(time.Hour)
	r.retry.Stop()
	r.leaderRetry = time.NewTimer(time.Hour)
	r.leaderRetry.Stop()
}

// stop ends run: it retires the watch in use and one being made (whose
// creation ends at once: run's ctx is done), stops following the keys'
// writes and stops the timers.
func (r *watchRun) stop() {
	if r.w != nil {
		r.ws.retire(r.w)
	}
	if r.creating {
		if c := <-r.created; c.w != nil {
			r.ws.retire(c.w)
		}
	}
	r.stopHints()
	r.leaderRetry.Stop()
	r.retry.Stop()
	r.check.Stop()
}

// updates returns the updates of the watch in use, nil while there is none.
func (r *watchRun) updates() <-chan jetstream.KeyValueEntry {
	if r.w == nil {
		return nil
	}
	return r.w.Updates()
}

// watchEnded takes the end of the updates of the watch in use: it is lost,
// and re-created after a pause.
func (r *watchRun) watchEnded() {
	cause, since := "the watch's subscription ended", time.Now()
	if ew, ok := r.w.KeyWatcher.(endingWatch); ok {
		if heard, err := ew.ended(); err != nil {
			cause, since = err.Error(), heard
		}
	}
	r.ws.log.Debug("natsstore: watch ended; re-creating it", "lease", r.key, "cause", cause)
	r.lose(cause, since)
	if !r.reported && time.Since(r.lostAt) >= r.stallAt {
		r.report()
	}
	r.retry.Reset(r.pause)
}

// afterReconnect re-creates the watch after a reconnect: the one in use is
// lost, and one being made is made again.
func (r *watchRun) afterReconnect(ctx context.Context) {
	r.ws.log.Debug("natsstore: reconnected; re-creating the watch", "lease", r.key)
	if r.w != nil {
		r.lose("the connection to NATS was lost", time.Now())
	}
	r.again = r.creating
	r.recreate(ctx)
}

// checkDue runs the liveness check of the watch in use: a revision an
// earlier check read that the watch has not delivered since is a stall;
// otherwise the key is read again.
func (r *watchRun) checkDue(ctx context.Context) {
	if r.w == nil {
		return
	}
	if r.pending != 0 && r.rev < r.pending {
		r.stalled(ctx)
		return
	}
	r.pending = 0
	r.startCheck(ctx)
	r.check.Reset(r.interval)
}

// checkAnswered takes the answer of a liveness check's read.
func (r *watchRun) checkAnswered(res checkResult) {
	r.reading = false
	if res.err == nil && res.gen == r.gen && r.w != nil && res.rev > r.rev {
		// Give the watch a little time to deliver what the read saw.
		r.pending, r.pendingAt = res.rev, res.at
		r.check.Reset(r.interval / 2)
	}
}

// use makes w the watch to forward.
func (r *watchRun) use(ctx context.Context, w *keyWatch) {
	r.w = w
	r.gen++
	r.initial, r.seen, r.rev, r.pending = true, false, 0, 0
	r.ownDone, r.leaderRev, r.leaderKnown = false, 0, false
	r.leaderRetry.Stop()
	r.leaderPause = rewatchMin
	r.stopHints() // the new watch reports every key's state
	r.hintFloor = 0
	r.out.start()
	r.retry.Stop()
	if r.interval > 0 {
		r.check.Reset(r.interval)
	}
	if r.ws.replicated {
		r.readLeaderRev(ctx)
	}
}

// deliver forwards one update of the watch; nil marks the end of the
// consumer's own initial state.
func (r *watchRun) deliver(e jetstream.KeyValueEntry) {
	if e == nil {
		if r.initial && !r.ownDone {
			r.ownDone = true
			r.settle()
		}
		return
	}
	if r.initial {
		r.seen = true
	}
	r.rev = max(r.rev, e.Revision())
	r.out.entry(e, r.initial)
	if r.pending != 0 && r.rev >= r.pending {
		r.pending = 0
		r.check.Reset(r.interval)
	}
	r.settle()
}

// settle ends the watch's initial state once it is complete.
//
// The consumer of a watch of a replicated bucket runs on any of the
// stream's replicas (nats-server places a consumer of one replica at
// random among them), and a follower may not have applied the last writes
// yet, although they were acknowledged: its consumer's initial state is
// then older than them, or empty. So the initial state is complete only once
// the watch has also delivered leaderRev, the last revision of the key (or
// under the prefix) that the stream leader showed after the watch was made:
// every write acknowledged before that read is then reflected. The entries
// delivered until then belong to the initial state. For a bucket of one
// replica, the consumer's own end of initial data is enough.
func (r *watchRun) settle() {
	if !r.initial || !r.ownDone {
		return
	}
	if r.ws.replicated && (!r.leaderKnown || r.rev < r.leaderRev) {
		return
	}
	r.initial = false
	r.leaderRetry.Stop()
	r.out.initialDone(r.seen)
	r.recovered()
}

// readLeaderRev reads the last revision of the key (or under the prefix)
// from the stream leader in the background, for leaderRev, unless a read is
// in flight (its answer, if it is for an earlier watch, sends another) or
// the initial state is complete.
func (r *watchRun) readLeaderRev(ctx context.Context) {
	if r.leaderReading || r.w == nil || !r.initial {
		return
	}
	r.leaderReading = true
	r.readLast(ctx, r.ws.cfg.timeout(), r.leaderRead)
}

// leaderRevAnswered takes the answer of a read for leaderRev. Until the
// watch has delivered leaderRev, it is read again after a pause that doubles
// up to rewatchMax, and the lowest answer is kept: each is enough, and a
// later one is lower only if the messages an earlier one showed are gone
// without a marker (a purge of the stream), which the watch would then never
// deliver. A failed read is retried after the same pauses.
func (r *watchRun) leaderRevAnswered(ctx context.Context, res checkResult) {
	if res.gen != r.gen {
		r.readLeaderRev(ctx) // the answer was for a watch that was replaced
		return
	}
	if ctx.Err() != nil || r.w == nil || !r.initial {
		return
	}
	if res.err != nil {
		r.ws.log.Debug("natsstore: reading the last revision of a watch's keys failed; retrying",
			"lease", r.key, "err", res.err, "pause", r.leaderPause)
	} else if !r.leaderKnown || res.rev < r.leaderRev {
		r.leaderRev, r.leaderKnown = res.rev, true
		if r.settle(); !r.initial {
			return
		}
	}
	r.leaderRetry.Reset(r.leaderPause)
	r.leaderPause = min(2*r.leaderPause, rewatchMax)
}

// startCheck reads the key's last revision in the background, unless a read
// is still in flight.
func (r *watchRun) startCheck(ctx context.Context) {
	if r.reading {
		return
	}
	r.reading = true
	r.readLast(ctx, min(r.interval, r.ws.cfg.timeout()), r.checked)
}

// readLast reads the last revision of the run's key (or under its prefix)
// in the background, within bound, and sends the answer, with the run's
// generation and the read's send time, on out, which has room for it: its
// caller makes one such read at a time.
func (r *watchRun) readLast(ctx context.Context, bound time.Duration, out chan<- checkResult) {
	gen, ws := r.gen, r.ws
	ws.goroutines.Add(1) // the caller's goroutine holds a count
	go func() {
		defer ws.goroutines.Done()
		at := time.Now()
		m, err := ws.read(ctx, at.Add(bound), r.key)
		res := checkResult{gen: gen, at: at, err: err}
		if err == nil {
			res.rev = m.Sequence
		}
		out <- res
	}()
}

// stalled handles a watch that did not deliver a revision a check read.
func (r *watchRun) stalled(ctx context.Context) {
	r.lose(r.ws.stallCause(), r.pendingAt)
	r.report()
	r.recreate(ctx)
}

// lose retires the watch, starts a silence unless one has begun, and
// follows the watch's keys through their writes until a new watch is made.
func (r *watchRun) lose(cause string, since time.Time) {
	if r.w != nil {
		r.ws.retire(r.w)
		r.w = nil
		r.hintFloor = max(r.hintFloor, r.rev)
	}
	r.startHints()
	r.check.Stop()
	r.pending = 0
	if r.lostAt.IsZero() {
		r.lostAt, r.cause, r.reported = since, cause, false
	}
}

// created is the outcome of an attempt to make a new watch.
type created struct {
	w   *keyWatch
	err error
}

// recreate starts making a new watch in the background, unless one is
// being made: the run goes on forwarding what the watch's keys' writes
// show meanwhile (watch_hint.go), and an attempt may wait up to attemptLimit for
// a server that does not answer.
func (r *watchRun) recreate(ctx context.Context) {
	if r.w != nil || r.creating || ctx.Err() != nil {
		return
	}
	if r.lostAt.IsZero() {
		r.lostAt = time.Now()
	}
	r.creating = true
	ws, limit := r.ws, r.ws.attemptLimit()
	ws.goroutines.Add(1) // the caller's goroutine holds a count
	go func() {
		defer ws.goroutines.Done()
		w, err := ws.startWatch(r.key, limit, ctx)
		r.created <- created{w: w, err: err} // never blocks: one at a time
	}()
}

// made takes the outcome of an attempt to make a new watch: the watch to
// forward, or the next attempt scheduled.
func (r *watchRun) made(ctx context.Context, c created) {
	again := r.again
	r.again = false
	if c.err == nil && r.w == nil && ctx.Err() == nil {
		r.use(ctx, c.w)
		if again { // made on the connection that was lost
			r.lose("the connection to NATS was lost", time.Now())
			r.recreate(ctx)
		}
		return
	}
	if c.w != nil {
		r.ws.retire(c.w)
	}
	if err := c.err; err != nil {
		if ctx.Err() != nil {
			return
		}
		r.cause = r.ws.recreateCause(err)
		r.ws.log.Debug("natsstore: re-creating a watch failed; retrying", "lease", r.key, "err", err, "pause", r.pause)
		if !r.reported && time.Since(r.lostAt) >= r.stallAt {
			r.report()
		}
		if again {
			r.recreate(ctx)
			return
		}
		r.retry.Reset(r.pause)
		r.pause = min(2*r.pause, rewatchMax)
	}
}

// report says that the watch has been silent for longer than it should.
func (r *watchRun) report() {
	r.reported = true
	ev := WatchStalled{Bucket: r.ws.bucket, Key: r.key, Silent: time.Since(r.lostAt), Cause: r.cause}
	r.ws.log.Warn("natsstore: a watch is silent; re-creating it", "lease", r.key, "silent", ev.Silent, "cause", ev.Cause)
	r.ws.emit(ev)
}

// recovered ends a silence once a new watch has delivered the key's state.
func (r *watchRun) recovered() {
	r.pause = rewatchMin
	if r.lostAt.IsZero() {
		return
	}
	if r.reported {
		ev := WatchRecovered{Bucket: r.ws.bucket, Key: r.key, Silent: time.Since(r.lostAt)}
		r.ws.log.Info("natsstore: a silent watch delivers again", "lease", r.key, "silent", ev.Silent)
		r.ws.emit(ev)
	}
	r.lostAt, r.cause, r.reported = time.Time{}, "", false
}

// stallCause names the likely cause of a watch that stopped delivering.
func (ws *watches) stallCause() string {
	if ws.nc != nil {
		if err := ws.nc.LastError(); err != nil && errors.Is(err, nats.ErrPermissionViolation) &&
			strings.Contains(err.Error(), "$JS.FC.") {
			return "the server stopped delivering because this user may not answer its flow control; " +
				"allow it to publish to $JS.FC.KV_" + ws.bucket + ".> (" + err.Error() + ")"
		}
	}
	return "the watch's consumer stopped delivering (lost with its server or in a stream leader change, " +
		"or stalled by unanswered flow control)"
}

// recreateCause names the likely cause of a failed watch creation.
func (c *storeConn) recreateCause(err error) string {
	switch {
	case errors.Is(err, errLinkLost):
		return "not connected to NATS"
	case errors.Is(err, nats.ErrPermissionViolation):
		return "creating the watch's consumer was refused: " + err.Error()
	case errors.Is(err, errCreateTimeout):
		// The server drops a request it does not permit, and says so apart.
		if c.nc != nil {
			if last := c.nc.LastError(); last != nil && errors.Is(last, nats.ErrPermissionViolation) &&
				strings.Contains(last.Error(), "CONSUMER.CREATE") {
				return "creating the watch's consumer was refused: " + last.Error()
			}
		}
		return "the server did not answer the creation of the watch's consumer " +
			"(the stream may have no leader: a server or its cluster is down)"
	}
	return "re-creating the watch failed: " + err.Error()
}
