package natsstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// checkInterval is how often a store checks its bucket and server when
// nothing else made it (a reconnect, an error that may mean a change, a key
// that vanished).
const checkInterval = 30 * time.Second

// Bounds of the pause between attempts of a check that could not reach the
// server.
const (
	recheckMin = 100 * time.Millisecond
	recheckMax = 5 * time.Second
)

// Check reads the bucket's configuration and the server's capabilities now, as
// the store does after every reconnect and every 30 seconds. It returns nil
// when the bucket is fit for leases, a *BucketError (lease.ErrStoreConfig)
// when the store stopped because it is not, and an error matching
// lease.ErrUnavailable when the server could not be asked.
func (s *Store) Check(ctx context.Context) error {
	deadline, err := s.writes.begin(ctx)
	if err != nil {
		return err
	}
	return s.bucketChecks.checkSince(ctx, deadline, time.Now())
}

// Err returns the *BucketError that stopped the store, or nil while it
// works.
func (s *Store) Err() error {
	if be := s.broken.Load(); be != nil {
		return be
	}
	return nil
}

// MaxTTL returns the bucket's maximum lease TTL: the longest TTL the store
// accepts, and how long it waits before taking a key that vanished without
// a release.
func (s *Store) MaxTTL() time.Duration { return s.maxTTL }

// checker runs one check of the bucket at a time, and lets callers share
// the result of a check that began after the moment they care about.
type checker struct {
	slot  chan struct{} // holds a token while a check runs
	begun time.Time     // when the last finished check began
	done  bool          // a check has finished
	err   error         // its result
}

// checkSince returns the result of a check of the bucket that began at or
// after since: the last one's if it did, or a new one's.
func (bc *bucketChecks) checkSince(ctx context.Context, deadline time.Time, since time.Time) error {
	if be := bc.broken.Load(); be != nil {
		return be
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	select {
	case bc.checks.slot <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-bc.checks.slot }()
	if bc.checks.done && !bc.checks.begun.Before(since) {
		return bc.checks.err
	}
	begun := time.Now()
	err := bc.check(ctx)
	bc.checks.begun, bc.checks.done, bc.checks.err = begun, true, err
	return err
}

// check compares the bucket and the server with what the store opened.
func (bc *bucketChecks) check(ctx context.Context) error {
	if be := bc.broken.Load(); be != nil {
		return be
	}
	if bc.js == nil {
		return nil // a store over a fake bucket, in tests
	}
	// 1. Read the bucket's stream.
	top := bc.top.Load() // before the request: the stream had it then
	f, mark, err := bc.readCheck(ctx)
	if err != nil {
		return err
	}
	// 2. Check that it is the stream the store opened, readable, and not
	// behind what the store has seen of it.
	if err := bc.sameStream(f); err != nil {
		return err
	}
	if f.lastSeq < top {
		return bc.checkBehind(ctx, top, f.lastSeq, mark)
	}
	bc.freshRead("")
	bc.sawRevision(f.lastSeq)
	// 3. Check that its configuration and its maximum lease TTL did not
	// change.
	if err := bc.sameConfig(f); err != nil {
		return err
	}
	// 4. Check that the server still expires per-message TTLs, when the
	// store relies on them.
	return bc.sameExpiry(f)
}

// readCheck reads the facts of the bucket for check, and the mark of the
// request that was answered. A stream that no longer exists stops the store.
func (bc *bucketChecks) readCheck(ctx context.Context) (bucketFacts, readMark, error) {
	var (
		f    bucketFacts
		mark readMark
	)
	// Sent again like a read: a request that reached a stream or a meta
	// group without a leader is dropped, and the check would hold the slot
	// until its deadline long after the cluster is back.
	_, err := bc.resending(ctx, func(sctx context.Context) (err error) {
		mark = bc.markRead()
		f, err = readFacts(sctx, bc.js, bc.bucket)
		return err
	})
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return f, mark, bc.halt(&BucketError{Bucket: bc.bucket, Problem: ProblemBucketDeleted,
			Detail: fmt.Sprintf("its stream KV_%s no longer exists (nats kv rm?)", bc.bucket),
			Fix:    "the store never creates a bucket it has opened; " + fixRestart})
	case err != nil:
		return f, mark, unavailable(ctx, "check bucket "+bc.bucket, err)
	}
	return f, mark, nil
}

// sameStream stops the store when the bucket's stream was created again,
// or when the server cannot read it.
func (bc *bucketChecks) sameStream(f bucketFacts) error {
	if !f.created.Equal(bc.created) {
		return bc.halt(&BucketError{Bucket: bc.bucket, Problem: ProblemBucketRecreated,
			Detail: fmt.Sprintf("it was created again at %s (it was created at %s when the store opened it): its leases "+
				"were lost, and its revisions may have restarted below tokens already issued",
				f.created.UTC().Format(time.RFC3339Nano), bc.created.UTC().Format(time.RFC3339Nano)),
			Fix: fixRestart})
	}
	if why := f.unreadable(); why != "" {
		return bc.halt(&BucketError{Bucket: bc.bucket, Problem: ProblemBucketChanged, Detail: why,
			Fix: "run the nats-server version that wrote the bucket again, then " + fixRestart})
	}
	return nil
}

// checkBehind judges a check whose read showed the stream's last revision
// got below top, the highest the store had seen (see regressedRead): the
// server lost writes, or a stream leader cut off from its cluster answered
// from what it has until it steps down, which is not a loss.
func (bc *bucketChecks) checkBehind(ctx context.Context, top, got uint64, mark readMark) error {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(bc.cfg.timeout())
	}
	what := "check bucket " + bc.bucket
	if err := bc.current(ctx, deadline, what, mark); err != nil {
		return err
	}
	return bc.regressedRead(what, "", top, got)
}

// sameConfig stops the store when the bucket's configuration was edited,
// or its maximum lease TTL changed.
func (bc *bucketChecks) sameConfig(f bucketFacts) error {
	if problems := bucketProblems(f.cfg); len(problems) > 0 {
		return bc.halt(&BucketError{Bucket: bc.bucket, Problem: ProblemBucketChanged,
			Detail: "its configuration was edited: " + joinProblems(problems),
			Fix:    "restore the configuration natsstore creates (nats stream edit KV_" + bc.bucket + "), then " + fixRestart})
	}
	maxTTL, recorded, err := recordedMaxTTL(bc.bucket, f.cfg)
	switch {
	case !recorded && f.noMetadata:
		// A server before 2.10 (one that replaced a newer server on the
		// same store) does not report metadata: the bucket still records
		// what the store read when it opened it.
	case err != nil:
		return bc.halt(&BucketError{Bucket: bc.bucket, Problem: ProblemBucketChanged, Detail: err.Error(), Fix: fixRestart})
	case recorded && maxTTL != bc.maxTTL, !recorded && bc.maxRecorded:
		return bc.halt(&BucketError{Bucket: bc.bucket, Problem: ProblemBucketChanged,
			Detail: fmt.Sprintf("its maximum lease TTL (metadata %s) changed from %q to %q: contenders may now wait "+
				"less than a holder's TTL", metaMaxTTL, bc.maxRecordedText(), f.cfg.Metadata[metaMaxTTL]),
			Fix: "restore the metadata, then " + fixRestart})
	}
	return nil
}

// sameExpiry handles a server or bucket that lost its per-message TTLs
// while the store relies on them: the store falls back to observed expiry,
// or stops when Config.Expiry is ExpiryServer.
func (bc *bucketChecks) sameExpiry(f bucketFacts) error {
	if ExpiryMode(bc.mode.Load()) != ExpiryServer {
		return nil
	}
	why := ttlMissing(f)
	switch {
	case why == "":
		return nil
	case bc.cfg.Expiry == ExpiryServer:
		return bc.halt(&BucketError{Bucket: bc.bucket, Problem: ProblemServerDowngraded,
			Detail: why + ", and Config.Expiry is ExpiryServer",
			Fix:    "run nats-server 2.11 or later with the bucket as natsstore created it, or use ExpiryAuto"})
	}
	bc.fallBack(why)
	return nil
}

// maxRecordedText describes the maximum lease TTL the bucket recorded when
// the store opened it.
func (b *openedBucket) maxRecordedText() string {
	if !b.maxRecorded {
		return ""
	}
	return b.maxTTL.String()
}

// fallBack makes the store judge expiry by observation from now on.
func (bc *bucketChecks) fallBack(why string) {
	if !bc.mode.CompareAndSwap(uint32(ExpiryServer), uint32(ExpiryObserved)) {
		return
	}
	bc.log.Warn("natsstore: " + why + "; leases are written without a per-message TTL from now on: contenders " +
		"still take a lease they have seen unchanged for its TTL, but the server removes none that nobody takes")
	bc.emit(ExpiryFallback{Bucket: bc.bucket, Reason: why})
}

// halt stops the store with be, unless it stopped already, and reports it.
// It returns the error the store stopped with.
func (bc *bucketChecks) halt(be *BucketError) *BucketError {
	if !bc.broken.CompareAndSwap(nil, be) {
		return bc.broken.Load()
	}
	bc.log.Error("natsstore: the store stopped: "+be.Error(), "problem", be.Problem.String())
	if be.Problem != ProblemSequenceRegression {
		bc.emit(BucketUnusable{Bucket: bc.bucket, Problem: be.Problem, Reason: be.Detail})
	}
	return be
}

// regressed stops the store: key (or the stream, for "") showed revision
// got after revision highest had been seen.
func (bc *bucketChecks) regressed(key string, highest, got uint64) *BucketError {
	where := atRevision(key)
	be := &BucketError{Bucket: bc.bucket, Problem: ProblemSequenceRegression,
		Detail: fmt.Sprintf("%s at revision %d, below revision %d seen before", where, got, highest),
		Fix:    fixRegression}
	if bc.broken.CompareAndSwap(nil, be) {
		bc.log.Error("natsstore: the store stopped: "+be.Error(), "problem", be.Problem.String())
		bc.emit(SequenceRegression{Bucket: bc.bucket, Key: key, Highest: highest, Got: got})
		return be
	}
	return bc.broken.Load()
}

// atRevision names where a revision showed: key, or the stream's end for
// "", as the subject of "... at revision N".
func atRevision(key string) string {
	if key == "" {
		return "the stream ends"
	}
	return fmt.Sprintf("key %q is", key)
}

// sawRevision records that the stream has reached revision rev.
func (b *keyBook) sawRevision(rev uint64) {
	for {
		top := b.top.Load()
		if rev <= top || b.top.CompareAndSwap(top, rev) {
			return
		}
	}
}

// keyTop returns the highest revision seen under key, 0 if none.
func (b *keyBook) keyTop(key string) uint64 {
	st, _ := b.keys.get(key)
	return st.Top
}

// acked checks the acknowledgement of a write to key sent when the highest
// revision seen was before: it must be from the bucket's stream and above
// every revision seen before the write, or the server issues revisions (and
// fencing tokens) again.
func (bc *bucketChecks) acked(key string, ack *jetstream.PubAck, before uint64) error {
	if ack.Stream != "" && ack.Stream != "KV_"+bc.bucket {
		return bc.halt(&BucketError{Bucket: bc.bucket, Problem: ProblemBucketRecreated,
			Detail: fmt.Sprintf("writes to its keys are stored in stream %q, not KV_%s", ack.Stream, bc.bucket),
			Fix:    fixRestart})
	}
	return bc.landed(key, ack.Sequence, before)
}

// landed checks the revision of a write of ours to key, sent when the
// highest revision seen was before.
func (bc *bucketChecks) landed(key string, rev, before uint64) error {
	if rev <= before {
		return bc.regressed(key, before, rev)
	}
	bc.sawRevision(rev)
	return nil
}

// poke asks the monitor for a check of the bucket soon.
func (u *upkeep) poke() {
	select {
	case u.pokes <- struct{}{}:
	default:
	}
}

// monitor checks the bucket after every reconnect, every checkInterval, and
// when poked, until the store closes or stops. A check owed after a
// reconnect is retried until the server answers it.
func (bc *bucketChecks) monitor() {
	var reconnected chan nats.Status
	if bc.nc != nil {
		reconnected = bc.nc.StatusChanged(nats.CONNECTED)
	}
	bc.goroutines.Add(1)
	go func() {
		defer bc.goroutines.Done()
		if reconnected != nil {
			defer bc.nc.RemoveStatusListener(reconnected)
		}
		tick := time.NewTicker(checkInterval)
		defer tick.Stop()
		var retry <-chan time.Time
		pause := recheckMin
		for {
			select {
			case <-bc.life.Done():
				return
			case _, ok := <-reconnected:
				if !ok {
					reconnected = nil
					continue
				}
			case <-tick.C:
			case <-bc.pokes:
			case <-retry:
			}
			ctx, cancel := context.WithTimeout(bc.life, bc.cfg.timeout())
			deadline, _ := ctx.Deadline()
			err := bc.checkSince(ctx, deadline, time.Now())
			cancel()
			switch {
			case isBucketError(err):
				return // stopped for good
			case err != nil && bc.life.Err() == nil:
				bc.log.Debug("natsstore: checking the bucket failed; retrying", "err", err, "pause", pause)
				retry = time.After(pause)
				pause = min(2*pause, recheckMax)
			default:
				retry, pause = nil, recheckMin
			}
		}
	}()
}

// failOp translates the error of an operation. A *BucketError passes
// through. An error that may mean that the bucket or the server changed
// (no stream answered, stream not found, per-message TTLs refused, a value
// too large) has the bucket checked first, so that a permanent change
// reports lease.ErrStoreConfig instead of lease.ErrUnavailable forever; the
// rest is fail's.
func (bc *bucketChecks) failOp(ctx context.Context, deadline time.Time, what string, err error) error {
	var be *BucketError
	if errors.As(err, &be) {
		return fmt.Errorf("natsstore: %s: %w", what, be)
	}
	if mayMeanChange(err) && ctx.Err() == nil {
		if cerr := bc.checkSince(ctx, deadline, time.Now()); errors.As(cerr, &be) {
			return fmt.Errorf("natsstore: %s: %w (the server said: %v)", what, be, err)
		}
	}
	return bc.fail(ctx, what, err)
}

// mayMeanChange reports whether err, an answer of the server, may mean that
// the bucket or the server changed.
func mayMeanChange(err error) bool {
	if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, jetstream.ErrStreamNotFound) {
		return true
	}
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	switch apiErr.ErrorCode {
	case jetstream.JSErrCodeStreamNotFound, jetstream.JSErrCodeStreamMessageExceedsMaximum,
		errCodeMessageTTLInvalid, errCodeMessageTTLDisabled:
		return true
	}
	return false
}

// JetStream API error codes nats.go does not name.
const (
	errCodeMessageTTLInvalid  jetstream.ErrorCode = 10165 // invalid per-message TTL
	errCodeMessageTTLDisabled jetstream.ErrorCode = 10166 // per-message TTL is disabled
)

// worse returns the error of a read made to resolve a write's unknown
// outcome when it stopped the store, and the write's error otherwise.
func worse(writeErr, readErr error) error {
	if isBucketError(readErr) {
		return readErr
	}
	return writeErr
}

// isBucketError reports whether err is, or wraps, a *BucketError.
func isBucketError(err error) bool {
	var be *BucketError
	return errors.As(err, &be)
}
