package natsstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore/internal/expiry"
)

// Header names and values of JetStream KV markers.
const (
	hdrOperation = "KV-Operation"
	opDelete     = "DEL"
	opPurge      = "PURGE"
	// hdrMarkerReason is set on markers the server writes itself.
	hdrMarkerReason = jetstream.MarkerReasonHeader
	reasonMaxAge    = "MaxAge" // a per-message TTL or the bucket's MaxAge ran out
)

// maxAttempts bounds the writes of one call. A call writes again only when
// it learned something new (a revision it may write at), so more attempts
// than this mean heavy contention; the call then reports ErrUnavailable.
const maxAttempts = 4

// minTTL is the smallest TTL this store accepts: per-message TTLs are whole
// seconds.
const minTTL = time.Second

// Acquire implements lease.Store, in one round trip when the store knows the
// key's revision. A key held by another term is taken once this store has
// seen its revision unchanged for its TTL (Acquisition.ExpiresIn says when);
// a key deleted or purged by hand, once the bucket's MaxTTL has passed. The
// rule is in natsstore/internal/expiry and docs/guarantees.md. A value that is
// not a lease is a *CorruptError and never free. Concurrent Acquires of one
// key in a store share one write. Errors matching lease.ErrStoreConfig (a
// *BucketError) mean the store stopped.
func (s *Store) Acquire(ctx context.Context, c lease.Claim) (lease.Acquisition, error) {
	if err := s.validTTL(lease.ValidateClaim(c), c.TTL); err != nil {
		return lease.Acquisition{}, err
	}
	rec := record{Kind: kindHeld, Owner: c.OwnerID, Term: c.Term, TTL: ttlMillis(c.TTL), Meta: c.Meta}
	a, err := s.writes.coalesced(ctx, c, rec, s.writes.ttlFor(c.TTL))
	return s.writes.settle(c.LeaseID, a, err), err
}

// settle finishes an Acquire or AcquireUnder of key: a failed one restarts
// the key's observation, and one that found the key held says when it will
// be judged expired, or, when it vanished without a release (no holder),
// when its wait of the bucket's MaxTTL ends.
func (w *writes) settle(key string, a lease.Acquisition, err error) lease.Acquisition {
	switch {
	case err != nil:
		w.keys.interrupt(key)
	case !a.Acquired && a.Holder.OwnerID == "" && a.Holder.Session == "":
		a.ExpiresIn = w.keys.vanishedLeft(key, w.rules())
	case !a.Acquired && a.Holder.Session != "":
		// Held while its session is: free when the session's key is judged
		// expired, which its own observation tells.
		a.ExpiresIn = w.keys.expiresIn(a.Holder.Session)
	case !a.Acquired:
		a.ExpiresIn = w.keys.expiresIn(key)
	}
	return a
}

// gaveUp explains a call that used up its attempts. When every refused
// write found the key unchanged at the revision it expected (at rev), there
// was no contention: the stream could not take writes (an isolated stream
// leader refuses every write after one of its proposals failed to commit,
// while reads show the key as it was).
func gaveUp(what string, moved bool, rev uint64) error {
	if moved {
		return fmt.Errorf("natsstore: %s: %w: the key kept changing under %d attempts",
			what, lease.ErrUnavailable, maxAttempts)
	}
	return fmt.Errorf("natsstore: %s: %w: the server refused %d writes at revision %d although the key stayed at "+
		"that revision: the stream cannot take writes now (it has no quorum, or its leader is isolated or behind)",
		what, lease.ErrUnavailable, maxAttempts, rev)
}

// pause waits a little before attempt+1 writes again at a revision whose
// write was refused while the key stayed unchanged: long enough for a write
// in flight to land (about a replication round trip), short next to a TTL.
// After the last attempt it does not wait.
func pause(ctx context.Context, attempt int) error {
	if attempt >= maxAttempts-1 {
		return nil
	}
	if !sleep(ctx, time.Millisecond<<attempt) {
		return ctx.Err()
	}
	return nil
}

// sleep waits d, or until ctx ends; it reports whether it waited d.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func acquired(c lease.Claim, rev uint64) lease.Acquisition {
	return lease.Acquisition{Acquired: true, Lease: lease.Lease{
		ID: c.LeaseID, OwnerID: c.OwnerID, Term: c.Term, Token: lease.Token(rev), TTL: c.TTL, Revision: rev, Meta: c.Meta,
	}}
}

// heldState is the keyState of a held record written at rev.
func heldState(rev uint64, r record) keyState {
	state := expiry.Held
	if r.Session != "" {
		state = expiry.Bound
	}
	return keyState{Key: expiry.Key{Rev: rev, State: state, TTL: r.TTL}, keyHolder: r.keyHolder(rev)}
}

// keyHolder is the holder r, a held record written at rev, names.
func (r record) keyHolder(rev uint64) keyHolder {
	return keyHolder{owner: r.Owner, term: r.Term, token: r.token(rev), acquired: r.Acquired, meta: r.Meta}
}

// fastPath returns the revision Acquire may write at without reading first:
// the key's last revision when this store knows it to be free or held by the
// claim's own term, 0 when the store knows nothing about the key (it is most
// likely new). write is false when the key is known to hold something else.
//
// A key whose watch delivered an expiry marker is written at the marker's
// revision once confirmExpiry trusts the marker, as judge trusts one it
// read: the write's expected revision checks that the marker is still the
// key's last message, and a refused write has the key read. A read of the
// key needs JetStream's meta leader, which a cluster can lack for seconds
// after a partition heals, while its stream takes writes and confirmExpiry
// asks the stream leader alone. Should the marker not be trusted, the key
// is read and judged; a bucket found changed (ErrStoreConfig) is the error.
func (w *writes) fastPath(ctx context.Context, deadline time.Time, key, owner, term string) (rev uint64, write bool, err error) {
	st, ok := w.keys.get(key)
	switch {
	case !ok:
		return 0, true, nil
	case st.free() || st.term == term && st.owner == owner:
		return st.Rev, true, nil
	case st.State == expiry.Marker:
		ok, err := w.trustMarker(ctx, deadline, key)
		return st.Rev, ok, err
	default:
		return 0, false, nil
	}
}

// heldRecord returns the held record in m, if m is one.
func heldRecord(m *jetstream.RawStreamMsg) (record, bool) {
	if m == nil || m.Sequence == 0 || len(m.Header.Get(hdrOperation)) > 0 || len(m.Header.Get(hdrMarkerReason)) > 0 {
		return record{}, false
	}
	r, err := parseRecord(m.Data)
	return r, err == nil && r.Kind == kindHeld
}

// ours reports whether m holds l: the write at l.Revision itself, or a later
// renewal of the same term (a write of ours that landed after we gave up on
// it, replayed after a reconnect, or an operator's copy of our value). The
// lease is then still l's, uninterrupted since l.Token.
func ours(m *jetstream.RawStreamMsg, l lease.Lease) bool {
	r, ok := heldRecord(m)
	return ok && m.Sequence >= l.Revision && r.Term == l.Term && r.Owner == l.OwnerID &&
		r.token(m.Sequence) == uint64(l.Token)
}

// precheck returns the revision at which Renew or Release may write l, and
// the acquisition time to repeat. A compare-and-swap on the revision alone
// cannot tell owners apart, so the store must know who wrote l.Revision: it
// does when it made that write itself (the common case, no round trip);
// otherwise it reads the key.
func (w *writes) precheck(ctx context.Context, deadline time.Time, op string, l lease.Lease) (rev uint64, acquiredAt int64, err error) {
	st, ok := w.keys.get(l.ID)
	if ok && st.Rev == l.Revision {
		if st.term == l.Term && st.owner == l.OwnerID && st.token == uint64(l.Token) {
			return l.Revision, st.acquired, nil
		}
		why := "released or expired"
		if st.owner != "" {
			why = fmt.Sprintf("held by %s (term %s) with token %d", st.owner, st.term, st.token)
		}
		return 0, 0, fmt.Errorf("natsstore: %s (owner %s, term %s, token %d): %w: revision %d is %s",
			l.ID, l.OwnerID, l.Term, l.Token, lease.ErrLost, l.Revision, why)
	}
	m, sent, err := w.readMarked(ctx, deadline, l.ID)
	if err != nil {
		return 0, 0, w.failOp(ctx, deadline, op+" "+l.ID, err)
	}
	if !ours(m, l) {
		if err := w.current(ctx, deadline, op+" "+l.ID, sent); err != nil {
			return 0, 0, err
		}
		return 0, 0, w.lost(ctx, deadline, l, m)
	}
	if r, ok := heldRecord(m); ok {
		acquiredAt = r.Acquired
	}
	return m.Sequence, acquiredAt, nil
}

// Renew implements lease.Store: one conditional write of a new value with the
// lease's TTL, at l.Revision. When the key has moved on, it reads it: a later
// renewal of the same term (a write of ours that landed after we gave up on
// it) is recognised and renewed; anything else is ErrLost.
func (s *Store) Renew(ctx context.Context, l lease.Lease) (lease.Lease, error) {
	rec := record{Kind: kindHeld, Owner: l.OwnerID, Term: l.Term, Token: uint64(l.Token), TTL: ttlMillis(l.TTL), Meta: l.Meta}
	rev, err := s.writes.rewrite(ctx, "renew", l, rec)
	if err != nil {
		return l, err
	}
	l.Revision = rev
	return l, nil
}

// Release implements lease.Store: a delete marker written at l.Revision,
// carrying a release record so that contenders know the owner let go
// (and need not wait, as they do after an operator's delete).
func (s *Store) Release(ctx context.Context, l lease.Lease) error {
	_, err := s.writes.rewrite(ctx, "release", l, record{Kind: kindReleased, Owner: l.OwnerID, Term: l.Term, Token: uint64(l.Token)})
	return err
}

// sentWrite is one attempt of a call: the nonce of its write, and the
// highest revision seen before it was sent, against which its revision is
// checked (bucketChecks.landed) if it is found to have landed, whichever
// attempt finds it.
type sentWrite struct {
	nonce, before uint64
}

// isWrite reports whether m is a write of rec made by this call, and which
// of its attempts (sent) made it: the same kind (a release is a delete
// marker) and term, and the attempt's nonce.
//
// It is asked after a write whose outcome is unknown, and after a write
// refused as a conflict, which may have landed all the same: right after a
// partition heals, the stream leader cut off by it may not know yet that
// it was deposed, and both it and the new leader answer a publish, the
// first answer winning. The old one refuses at once (it checks the
// expected revision against its stale state); the new one commits (a
// chaos run saw a release that had landed reported as "lost: released").
func isWrite(m *jetstream.RawStreamMsg, rec record, sent []sentWrite) (sentWrite, bool) {
	var r record
	ok := false
	switch {
	case rec.Kind == kindHeld:
		r, ok = heldRecord(m)
	case m != nil && m.Header.Get(hdrOperation) == opDelete:
		var err error
		r, err = parseRecord(m.Data)
		ok = err == nil && r.Kind == kindReleased
	}
	if !ok || r.Term != rec.Term {
		return sentWrite{}, false
	}
	for _, w := range sent {
		if w.nonce == r.Nonce {
			return w, true
		}
	}
	return sentWrite{}, false
}

// opNoun names the write of op in messages.
func opNoun(op string) string {
	if op == "renew" {
		return "renewal"
	}
	return op
}

// lost explains why l is not held any more, from the key's last message m.
// A lost lease is often how a change of the bucket first shows to its owner
// (a deleted and re-created bucket, a rolled-back server), so the bucket is
// checked first: a *BucketError, not ErrLost, then reports a bucket the
// store must stop using.
func (w *writes) lost(ctx context.Context, deadline time.Time, l lease.Lease, m *jetstream.RawStreamMsg) error {
	if err := w.checkSince(ctx, deadline, time.Now()); isBucketError(err) {
		return fmt.Errorf("natsstore: %s (owner %s, term %s, token %d): %w", l.ID, l.OwnerID, l.Term, l.Token, err)
	}
	var why string
	switch {
	case m == nil || m.Sequence == 0:
		// Purged, or the whole bucket emptied: contenders that saw the key
		// wait before they take it (see judgeEmpty).
		why = "the key is empty (purged without a marker, or the bucket was emptied)"
	case m.Sequence < l.Revision:
		// A revision the store never saw under this key (read would have
		// reported a regression otherwise): not a lease of this bucket.
		why = fmt.Sprintf("the key is at revision %d, before the lease's revision %d", m.Sequence, l.Revision)
	default:
		kind, r, err := w.classify(l.ID, m)
		switch kind {
		case msgHeld:
			why = fmt.Sprintf("held by %s (term %s) with token %d at revision %d", r.Owner, r.Term, r.token(m.Sequence), m.Sequence)
			w.keys.put(l.ID, heldState(m.Sequence, r))
		case msgFree:
			why = fmt.Sprintf("released or expired at revision %d", m.Sequence)
		case msgRemoved:
			why = fmt.Sprintf("deleted by someone else than its owner at revision %d", m.Sequence)
			w.log.Warn("natsstore: lease key deleted behind its owner's back", "lease", l.ID,
				"owner", l.OwnerID, "token", l.Token, "revision", m.Sequence)
		default:
			why = err.Error()
			w.log.Warn("natsstore: lease key overwritten with a value that is not a lease", "lease", l.ID,
				"owner", l.OwnerID, "token", l.Token, "revision", m.Sequence)
		}
	}
	return fmt.Errorf("natsstore: %s (owner %s, term %s, token %d): %w: %s", l.ID, l.OwnerID, l.Term, l.Token, lease.ErrLost, why)
}

// result classifies the outcome of a write.
type result uint8

const (
	failed   result = iota // definitely not written
	written                // acknowledged
	conflict               // the key was not at the expected revision
	unknown                // may have been written: read it back
)

func outcome(ctx context.Context, err error) result {
	switch {
	case err == nil:
		return written
	case errors.Is(err, errResent) && ctx.Err() == nil:
		return unknown
	case isConflict(err):
		return conflict
	case isBucketError(err):
		return failed // written, but the store stopped; or not sent
	case ctx.Err() != nil:
		// The caller's time is up: nothing can be read back now. The next
		// call resolves it (see ours).
		return failed
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, nats.ErrReconnectBufExceeded), errors.Is(err, nats.ErrConnectionClosed),
		errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrConnectionDraining),
		errors.Is(err, nats.ErrPermissionViolation), errors.Is(err, ErrPermission):
		return failed // not sent, or no stream took it
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return failed // the server answered: refused
	}
	return unknown // a timeout after sending, a lost connection, ...
}

// attemptShare is the part of a call's remaining time that one write may
// use, so that a write that times out leaves time to read the key back.
const attemptShare = 3 // of 4

// publish writes rec under key, expecting the key's last revision to be
// expect (0: no message), with a per-message TTL when ttl > 0.
func (w *writes) publish(ctx context.Context, deadline time.Time, key string, rec record, expect uint64, ttl time.Duration) (*jetstream.PubAck, error) {
	m := &nats.Msg{Subject: w.putPrefix + key, Data: appendRecord(make([]byte, 0, 128), rec),
		Header: writeHeader(rec.Kind, expect, ttl)}
	g := w.guard(ctx, deadline, attemptShare)
	defer g.end()
	actx := g.ctx
	before := w.top.Load()
	ack, err := w.sendWrite(actx, m)
	if err == nil && ack == nil {
		err = jetstream.ErrInvalidJSAck
	}
	if err == nil {
		if err := w.acked(key, ack, before); err != nil {
			return nil, err
		}
	}
	if err != nil && ctx.Err() == nil && w.linkLost(actx) {
		err = fmt.Errorf("%w: %w", errLinkLost, err)
	}
	if err != nil && !isConflict(err) {
		err = w.dropped(m.Subject, err)
	}
	return ack, err
}

// writeHeader returns the headers of a write of a record of kind: the
// revision it expects the key to be at (0: no message), the per-message
// TTL when ttl > 0, and the delete operation of a release. They are the
// headers jetstream.WithExpectLastSequencePerSubject, WithMsgTTL and the
// KV's Delete set; the write passes no publish options (jsBucket.PublishMsg).
func writeHeader(kind recordKind, expect uint64, ttl time.Duration) nats.Header {
	h := make(nats.Header, 3)
	h[jetstream.ExpectedLastSubjSeqHeader] = []string{strconv.FormatUint(expect, 10)}
	if ttl > 0 {
		h[jetstream.MsgTTLHeader] = []string{ttl.String()}
	}
	if kind == kindReleased {
		h[hdrOperation] = []string{opDelete}
	}
	return h
}

// sendWrite publishes m within actx, sending it again as resending says: a
// write that reaches a stream without a leader (an election takes 4 to 9 s
// after the old leader is lost) is dropped, not queued for the next leader,
// so only a new copy lands once the stream has a leader again. The copies
// are one message, with one nonce and one expected revision: at most one of
// them lands. A conflict after a copy went unanswered may mean that the
// first one landed: it is reported as errResent, which the caller resolves
// by reading the key back.
func (w *writes) sendWrite(actx context.Context, m *nats.Msg) (*jetstream.PubAck, error) {
	var ack *jetstream.PubAck
	resent, err := w.resending(actx, func(sctx context.Context) (err error) {
		ack, err = w.kv.PublishMsg(sctx, m)
		return err
	})
	if resent && isConflict(err) {
		return nil, fmt.Errorf("%w: %w", errResent, err)
	}
	return ack, err
}

// getLast reads the last message of subject within actx, and returns the
// mark of the request that was answered, asking again as
// resending says: a read that reaches a stream without a leader is dropped
// too, and a standby's Acquire sent during an election would otherwise wait
// for its whole deadline after the stream is back, missing the release its
// watch reports meanwhile.
func (w *writes) getLast(actx context.Context, subject string) (*jetstream.RawStreamMsg, readMark, error) {
	return w.getLastVia(actx, subject, nil)
}

// getLastVia is getLast, where a read refused for want of a meta leader
// calls alt (if not nil): an error alt returns ends the read (write_direct.go).
func (w *writes) getLastVia(actx context.Context, subject string, alt func(context.Context, error) error) (*jetstream.RawStreamMsg, readMark, error) {
	var (
		m    *jetstream.RawStreamMsg
		mark readMark
	)
	_, err := w.resending(actx, func(sctx context.Context) (err error) {
		mark = w.markRead()
		m, err = w.kv.GetLastMsgForSubject(sctx, subject)
		if alt != nil && metaLeaderless(err) {
			if aerr := alt(sctx, err); aerr != nil {
				return aerr
			}
		}
		return err
	})
	return m, mark, err
}

// resending calls try within actx, once for a bucket of one replica. For a
// replicated bucket it calls it again when the stream does not answer within
// resendAfter, or at once (resendPause later) when the stream has no leader
// to answer; resent tells whether a call went unanswered.
func (w *writes) resending(actx context.Context, try func(context.Context) error) (resent bool, err error) {
	if !w.replicated() {
		return false, try(actx)
	}
	for {
		sctx, cancel := context.WithTimeout(actx, resendAfter)
		err := try(sctx)
		unanswered := err != nil && sctx.Err() != nil && actx.Err() == nil
		cancel()
		switch {
		case err == nil:
			return resent, nil
		case unanswered:
			resent = true
			w.keys.outage()
			continue
		case !noLeader(err):
			return resent, err
		}
		w.keys.outage()
		t := time.NewTimer(resendPause)
		select {
		case <-actx.Done():
			t.Stop()
			return resent, err
		case <-t.C:
		}
	}
}

// noLeader reports whether err means that the bucket's stream has no
// leader to take a write now: no responder, or JetStream unavailable.
func noLeader(err error) bool {
	if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.Code == http.StatusServiceUnavailable
}

const (
	// resendAfter is how long a write or a read of a replicated bucket waits
	// for its answer before it is sent again (writes.resending).
	resendAfter = 500 * time.Millisecond
	// resendPause is how long one waits before it is sent again when it
	// found no responder.
	resendPause = 50 * time.Millisecond
)

// errResent marks a conflict met by a write sent again after a copy went
// unanswered: the copy may have landed, so the outcome is unknown.
var errResent = errors.New("natsstore: a write sent again after a copy went unanswered was refused")

// linkLost reports whether a request with context rctx was cut short by the
// loss of the connection.
func (c *storeConn) linkLost(rctx context.Context) bool {
	l := c.link.Load()
	return rctx.Err() != nil && l != nil && l.ctx.Err() != nil
}

// read returns the key's last message, or an empty message (Sequence 0) when
// the subject has none.
func (w *writes) read(ctx context.Context, deadline time.Time, key string) (*jetstream.RawStreamMsg, error) {
	m, _, err := w.readMarked(ctx, deadline, key)
	return m, err
}

// readMarked is read, which also returns when and on which connection the
// request that was answered was sent (the call may send it more than once),
// for writes.current.
func (w *writes) readMarked(ctx context.Context, deadline time.Time, key string) (*jetstream.RawStreamMsg, readMark, error) {
	return w.readVia(ctx, deadline, key, nil)
}

// readOrFree is readMarked for Acquire, which also looks for the key free
// through a direct get while reads are refused for want of a meta leader:
// it then returns a *freeAt error (write_direct.go).
func (w *writes) readOrFree(ctx context.Context, deadline time.Time, key string) (*jetstream.RawStreamMsg, readMark, error) {
	return w.readVia(ctx, deadline, key, func(sctx context.Context, err error) error {
		return w.directFree(sctx, deadline, key, err)
	})
}

// readVia is readMarked, whose refused reads call alt (see getLast).
func (w *writes) readVia(ctx context.Context, deadline time.Time, key string, alt func(context.Context, error) error) (*jetstream.RawStreamMsg, readMark, error) {
	g := w.guard(ctx, deadline, 4)
	defer g.end()
	rctx := g.ctx
	top := w.keyTop(key) // before the request: the server had it then
	m, mark, err := w.getLastVia(rctx, w.subject+key, alt)
	if err != nil && ctx.Err() == nil && w.linkLost(rctx) {
		err = fmt.Errorf("%w: %w", errLinkLost, err)
	}
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return &jetstream.RawStreamMsg{}, mark, nil
	}
	if err == nil && m != nil && m.Sequence != 0 {
		if m.Sequence < top {
			// History 1 keeps one message per key: an older one can only
			// come back if the server lost the newer, or from a stream
			// leader cut off from its cluster, which answers from what it
			// has until it steps down (write_stale.go).
			if err := w.current(ctx, deadline, "read "+key, mark); err != nil {
				return nil, mark, err
			}
			return nil, mark, w.regressedRead("read "+key, key, top, m.Sequence)
		}
		w.freshRead(key)
		w.sawRevision(m.Sequence)
	}
	return m, mark, err
}

func orNotFound(m *jetstream.RawStreamMsg) *jetstream.RawStreamMsg {
	if m == nil {
		return &jetstream.RawStreamMsg{}
	}
	return m
}

// ttlFor returns the per-message TTL of a held value: the lease TTL plus
// Config.ExpiryGrace (Config.serverTTL), or 0 (none) in observed mode.
func (w *writes) ttlFor(ttl time.Duration) time.Duration {
	if w.expiry() != ExpiryServer {
		return 0
	}
	return w.cfg.serverTTL(ttl)
}

// ttlMillis returns ttl rounded up to whole milliseconds, as records keep it.
func ttlMillis(ttl time.Duration) time.Duration {
	if r := ttl % time.Millisecond; r != 0 && ttl < 1<<62 {
		return ttl - r + time.Millisecond
	}
	return ttl
}

// validTTL adds this store's TTL bounds to err, a lease validation result:
// at least minTTL, at most the bucket's maximum lease TTL.
func (b *openedBucket) validTTL(err error, ttl time.Duration) error {
	if err != nil {
		return err
	}
	if ttl < minTTL {
		return &lease.FieldError{Field: "TTL", Reason: fmt.Sprintf(
			"%v is below this store's minimum of %v (NATS per-message TTLs are whole seconds)", ttl, minTTL)}
	}
	if b.claimMax > 0 && ttl > b.claimMax {
		return &lease.FieldError{Field: "TTL", Reason: fmt.Sprintf(
			"%v is above the longest lease TTL of %v that bucket %q allows (Config.MaxTTL, recorded in the bucket "+
				"when it is created); contenders wait that long for a key deleted or purged by hand", ttl, b.claimMax, b.bucket)}
	}
	return nil
}
