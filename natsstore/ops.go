package natsstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/asterforge/aster/lease"
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

// Acquire implements lease.Store. It takes one round trip when the store
// already knows the key's revision (it wrote or released it last) or the key
// has never been written; otherwise it reads the key first.
//
// A key counts as free when it is empty, when its last message is a release
// marker written by this package, or when it is an expiry marker of the
// server. When an operator deleted or purged the key (a marker without a
// release record), contenders wait one TTL (the larger of the claim's and the
// last held value's they saw), measured from when they first saw the marker,
// because the owner it was taken from may still be acting until its own TTL
// runs out. In ExpiryObserved mode, and for held values written without a
// per-message TTL, a held value counts as expired once this store has seen
// its revision unchanged for its TTL. A value this package cannot read is
// reported as a *CorruptError and never counts as free.
func (s *Store) Acquire(ctx context.Context, c lease.Claim) (lease.Acquisition, error) {
	if err := validateTTL(lease.ValidateClaim(c), c.TTL); err != nil {
		return lease.Acquisition{}, err
	}
	deadline, err := s.begin(ctx)
	if err != nil {
		return lease.Acquisition{}, err
	}

	rec := record{Kind: kindHeld, Owner: c.OwnerID, Term: c.Term, TTL: ttlMillis(c.TTL),
		Acquired: time.Now().UnixMilli(), Meta: c.Meta}
	expect, write := s.fastPath(c.LeaseID, c.OwnerID, c.Term)
	var last *jetstream.RawStreamMsg // the key's last message, read after a failed write
	for range maxAttempts {
		if write {
			rec.Nonce = rand.Uint64()
			ack, err := s.publish(ctx, deadline, c.LeaseID, rec, expect, s.ttlFor(c.TTL))
			switch outcome(ctx, err) {
			case written:
				s.keys.put(c.LeaseID, heldState(ack.Sequence, rec))
				return acquired(c, ack.Sequence), nil
			case conflict:
				last = nil
			case unknown:
				// The write may have landed: read the key back. Our nonce
				// there means it did, and its revision is the token.
				m, rerr := s.read(ctx, deadline, c.LeaseID)
				if rerr != nil {
					return lease.Acquisition{}, s.fail(ctx, "acquire "+c.LeaseID, err)
				}
				if r, ok := heldRecord(m); ok && r.Term == c.Term && r.Nonce == rec.Nonce {
					s.keys.put(c.LeaseID, heldState(m.Sequence, rec))
					return acquired(c, m.Sequence), nil
				}
				last = orNotFound(m)
			default:
				return lease.Acquisition{}, s.fail(ctx, "acquire "+c.LeaseID, err)
			}
		}
		if last == nil {
			m, err := s.read(ctx, deadline, c.LeaseID)
			if err != nil {
				return lease.Acquisition{}, s.fail(ctx, "acquire "+c.LeaseID, err)
			}
			last = orNotFound(m)
		}
		v, err := s.judge(c, last)
		if err != nil || !v.free {
			return lease.Acquisition{Holder: v.holder}, err
		}
		expect, write, last = v.rev, true, nil
	}
	return lease.Acquisition{}, fmt.Errorf("natsstore: acquire %s: %w: the key kept changing under %d attempts",
		c.LeaseID, lease.ErrUnavailable, maxAttempts)
}

func acquired(c lease.Claim, rev uint64) lease.Acquisition {
	return lease.Acquisition{Acquired: true, Lease: lease.Lease{
		ID: c.LeaseID, OwnerID: c.OwnerID, Term: c.Term, Token: lease.Token(rev), TTL: c.TTL, Revision: rev, Meta: c.Meta,
	}}
}

// heldState is the keyState of a held record written at rev.
func heldState(rev uint64, r record) keyState {
	return keyState{rev: rev, owner: r.Owner, term: r.Term, ttl: r.TTL, token: r.token(rev),
		acquired: r.Acquired, meta: r.Meta}
}

// fastPath returns the revision Acquire may write at without reading first:
// the key's last revision when this store knows it to be free or held by the
// claim's own term, 0 when the store knows nothing about the key (it is most
// likely new). write is false when the key is known to hold something else.
func (s *Store) fastPath(key, owner, term string) (rev uint64, write bool) {
	st, ok := s.keys.get(key)
	switch {
	case !ok:
		return 0, true
	case st.free || st.term == term && st.owner == owner:
		return st.rev, true
	default:
		return 0, false
	}
}

// verdict is what judge decided about a key's last message.
type verdict struct {
	free   bool         // Acquire may write at rev
	rev    uint64       // the revision to write at
	holder lease.Holder // the holder, when not free; zero if unknown
}

// judge decides whether c may take the key whose last message is m (nil for
// an empty subject).
func (s *Store) judge(c lease.Claim, m *jetstream.RawStreamMsg) (verdict, error) {
	if m.Sequence == 0 {
		s.keys.put(c.LeaseID, keyState{free: true})
		return verdict{free: true}, nil
	}
	rev := m.Sequence
	switch kind, rec, err := s.classify(c.LeaseID, m); kind {
	case msgCorrupt:
		s.keys.put(c.LeaseID, keyState{rev: rev})
		return verdict{}, err
	case msgFree:
		s.keys.put(c.LeaseID, keyState{rev: rev, free: true})
		return verdict{free: true, rev: rev}, nil
	case msgHeld:
		st := heldState(rev, rec)
		if rec.Term == c.Term && rec.Owner == c.OwnerID {
			// Our own term's write, which landed although we did not learn
			// it: take it over with a new write (and a new token).
			s.keys.put(c.LeaseID, st)
			return verdict{free: true, rev: rev}, nil
		}
		if s.mode == ExpiryServer && m.Header.Get(jetstream.MsgTTLHeader) != "" {
			s.keys.put(c.LeaseID, st)
			return verdict{holder: rec.holder(rev)}, nil
		}
		if s.keys.observe(c.LeaseID, st, rec.TTL) {
			s.log.Info("natsstore: lease judged expired: its revision did not change for its TTL",
				"lease", c.LeaseID, "owner", rec.Owner, "term", rec.Term, "revision", rev, "ttl", rec.TTL)
			return verdict{free: true, rev: rev}, nil
		}
		return verdict{holder: rec.holder(rev)}, nil
	default: // msgRemoved: deleted or purged by someone else than its owner
		prev, _ := s.keys.get(c.LeaseID)
		wait := max(ttlMillis(c.TTL), prev.ttl)
		if s.keys.observe(c.LeaseID, keyState{rev: rev}, wait) {
			return verdict{free: true, rev: rev}, nil
		}
		if prev.rev != rev {
			s.log.Warn("natsstore: lease key was deleted or purged, not released by its owner; "+
				"waiting one TTL before taking it, as its last owner may still be acting",
				"lease", c.LeaseID, "revision", rev, "wait", wait)
		}
		return verdict{}, nil
	}
}

type msgKind uint8

const (
	msgCorrupt msgKind = iota // the zero value is the safe one: never free
	msgHeld                   // a held record
	msgFree                   // a release marker of ours or an expiry marker
	msgRemoved                // a delete or purge marker of someone else
)

// classify reads a key's last message.
func (s *Store) classify(key string, m *jetstream.RawStreamMsg) (msgKind, record, error) {
	switch m.Header.Get(hdrOperation) {
	case opDelete:
		if r, err := parseRecord(m.Data); err == nil && r.Kind == kindReleased {
			return msgFree, r, nil
		}
		return msgRemoved, record{}, nil
	case opPurge:
		return msgRemoved, record{}, nil
	case "":
	default:
		return msgCorrupt, record{}, s.corrupt(key, m.Sequence, fmt.Sprintf("unknown KV operation %q", m.Header.Get(hdrOperation)))
	}
	switch reason := m.Header.Get(hdrMarkerReason); reason {
	case "":
	case reasonMaxAge:
		return msgFree, record{}, nil
	default: // "Purge", "Remove": removed through the stream API
		return msgRemoved, record{}, nil
	}
	r, err := parseRecord(m.Data)
	switch {
	case err != nil:
		return msgCorrupt, r, s.corrupt(key, m.Sequence, err.Error())
	case r.Kind != kindHeld:
		return msgCorrupt, r, s.corrupt(key, m.Sequence, "a "+r.Kind.String()+" record outside a delete marker")
	}
	return msgHeld, r, nil
}

func (s *Store) corrupt(key string, rev uint64, reason string) error {
	return &CorruptError{Bucket: s.bucket, Key: key, Revision: rev, Reason: reason}
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
func (s *Store) precheck(ctx context.Context, deadline time.Time, op string, l lease.Lease) (rev uint64, acquiredAt int64, err error) {
	st, ok := s.keys.get(l.ID)
	if ok && st.rev == l.Revision {
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
	m, err := s.read(ctx, deadline, l.ID)
	if err != nil {
		return 0, 0, s.fail(ctx, op+" "+l.ID, err)
	}
	if !ours(m, l) {
		return 0, 0, s.lost(l, m)
	}
	if r, ok := heldRecord(m); ok {
		acquiredAt = r.Acquired
	}
	return m.Sequence, acquiredAt, nil
}

// Renew implements lease.Store: one conditional write of a new value with the
// lease's TTL, at l.Revision. When the key has moved on, it reads it: a later
// renewal of the same acquisition by the same owner (a write of ours that
// landed after we gave up on it) is recognised and renewed; anything else is
// ErrLost.
func (s *Store) Renew(ctx context.Context, l lease.Lease) (lease.Lease, error) {
	if err := validateTTL(lease.ValidateLease(l), l.TTL); err != nil {
		return l, err
	}
	deadline, err := s.begin(ctx)
	if err != nil {
		return l, err
	}

	rec := record{Kind: kindHeld, Owner: l.OwnerID, Term: l.Term, Token: uint64(l.Token), TTL: ttlMillis(l.TTL), Meta: l.Meta}
	expect, acquiredAt, err := s.precheck(ctx, deadline, "renew", l)
	if err != nil {
		return l, err
	}
	rec.Acquired = acquiredAt
	for range maxAttempts {
		rec.Nonce = rand.Uint64()
		ack, err := s.publish(ctx, deadline, l.ID, rec, expect, s.ttlFor(l.TTL))
		var m *jetstream.RawStreamMsg
		switch outcome(ctx, err) {
		case written:
			s.keys.put(l.ID, heldState(ack.Sequence, rec))
			l.Revision = ack.Sequence
			return l, nil
		case conflict:
			if m, err = s.read(ctx, deadline, l.ID); err != nil {
				return l, s.fail(ctx, "renew "+l.ID, err)
			}
		case unknown:
			rerr := err
			if m, err = s.read(ctx, deadline, l.ID); err != nil {
				return l, s.fail(ctx, "renew "+l.ID, rerr)
			}
			if r, ok := heldRecord(m); ok && r.Term == l.Term && r.Nonce == rec.Nonce {
				s.keys.put(l.ID, heldState(m.Sequence, rec))
				l.Revision = m.Sequence
				return l, nil
			}
			if m != nil && m.Sequence == expect {
				return l, s.fail(ctx, "renew "+l.ID, fmt.Errorf("the renewal did not land (yet): %w", rerr))
			}
		default:
			return l, s.fail(ctx, "renew "+l.ID, err)
		}
		if !ours(m, l) {
			return l, s.lost(l, m)
		}
		expect = m.Sequence
	}
	return l, fmt.Errorf("natsstore: renew %s: %w: the key kept changing under %d attempts",
		l.ID, lease.ErrUnavailable, maxAttempts)
}

// Release implements lease.Store: a delete marker written at l.Revision,
// carrying a release record so that contenders know the owner let go
// (and need not wait, as they do after an operator's delete).
func (s *Store) Release(ctx context.Context, l lease.Lease) error {
	if err := validateTTL(lease.ValidateLease(l), l.TTL); err != nil {
		return err
	}
	deadline, err := s.begin(ctx)
	if err != nil {
		return err
	}

	rec := record{Kind: kindReleased, Owner: l.OwnerID, Term: l.Term, Token: uint64(l.Token)}
	expect, acquiredAt, err := s.precheck(ctx, deadline, "release", l)
	if err != nil {
		return err
	}
	rec.Acquired = acquiredAt
	for range maxAttempts {
		rec.Nonce = rand.Uint64()
		ack, err := s.publish(ctx, deadline, l.ID, rec, expect, s.markerTTL)
		var m *jetstream.RawStreamMsg
		switch outcome(ctx, err) {
		case written:
			s.keys.put(l.ID, keyState{rev: ack.Sequence, free: true})
			return nil
		case conflict:
			if m, err = s.read(ctx, deadline, l.ID); err != nil {
				return s.fail(ctx, "release "+l.ID, err)
			}
		case unknown:
			rerr := err
			if m, err = s.read(ctx, deadline, l.ID); err != nil {
				return s.fail(ctx, "release "+l.ID, rerr)
			}
			if m != nil && m.Header.Get(hdrOperation) == opDelete {
				if r, err := parseRecord(m.Data); err == nil && r.Kind == kindReleased && r.Term == l.Term && r.Nonce == rec.Nonce {
					s.keys.put(l.ID, keyState{rev: m.Sequence, free: true})
					return nil
				}
			}
			if m != nil && m.Sequence == expect {
				return s.fail(ctx, "release "+l.ID, fmt.Errorf("the release did not land (yet): %w", rerr))
			}
		default:
			return s.fail(ctx, "release "+l.ID, err)
		}
		if !ours(m, l) {
			return s.lost(l, m)
		}
		expect = m.Sequence
	}
	return fmt.Errorf("natsstore: release %s: %w: the key kept changing under %d attempts",
		l.ID, lease.ErrUnavailable, maxAttempts)
}

// lost explains why l is not held any more, from the key's last message m.
func (s *Store) lost(l lease.Lease, m *jetstream.RawStreamMsg) error {
	var why string
	switch {
	case m == nil || m.Sequence == 0:
		why = "the key is empty"
	case m.Sequence < l.Revision:
		why = fmt.Sprintf("the key is at revision %d, before the lease's revision %d", m.Sequence, l.Revision)
	default:
		kind, r, err := s.classify(l.ID, m)
		switch kind {
		case msgHeld:
			why = fmt.Sprintf("held by %s (term %s) with token %d at revision %d", r.Owner, r.Term, r.token(m.Sequence), m.Sequence)
			s.keys.put(l.ID, heldState(m.Sequence, r))
		case msgFree:
			why = fmt.Sprintf("released or expired at revision %d", m.Sequence)
		case msgRemoved:
			why = fmt.Sprintf("deleted by someone else than its owner at revision %d", m.Sequence)
			s.log.Warn("natsstore: lease key deleted behind its owner's back", "lease", l.ID,
				"owner", l.OwnerID, "token", l.Token, "revision", m.Sequence)
		default:
			why = err.Error()
			s.log.Warn("natsstore: lease key overwritten with a value that is not a lease", "lease", l.ID,
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
	case isConflict(err):
		return conflict
	case ctx.Err() != nil:
		// The caller's time is up: nothing can be read back now. The next
		// call resolves it (see ours).
		return failed
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, nats.ErrReconnectBufExceeded), errors.Is(err, nats.ErrConnectionClosed),
		errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrConnectionDraining),
		errors.Is(err, nats.ErrPermissionViolation):
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
func (s *Store) publish(ctx context.Context, deadline time.Time, key string, rec record, expect uint64, ttl time.Duration) (*jetstream.PubAck, error) {
	m := &nats.Msg{Subject: s.putPrefix + key, Data: appendRecord(make([]byte, 0, 128), rec)}
	if rec.Kind == kindReleased {
		m.Header = nats.Header{hdrOperation: []string{opDelete}}
	}
	opts := make([]jetstream.PublishOpt, 1, 2)
	opts[0] = jetstream.WithExpectLastSequencePerSubject(expect)
	if ttl > 0 {
		opts = append(opts, jetstream.WithMsgTTL(ttl))
	}
	g := s.guard(ctx, deadline, attemptShare)
	defer g.end()
	actx := g.ctx
	ack, err := s.kv.PublishMsg(actx, m, opts...)
	if err == nil && ack == nil {
		err = jetstream.ErrInvalidJSAck
	}
	if err != nil && ctx.Err() == nil && s.linkLost(actx) {
		err = fmt.Errorf("%w: %w", errLinkLost, err)
	}
	return ack, err
}

// linkLost reports whether a request with context rctx was cut short by the
// loss of the connection.
func (s *Store) linkLost(rctx context.Context) bool {
	l := s.link.Load()
	return rctx.Err() != nil && l != nil && l.ctx.Err() != nil
}

// read returns the key's last message, or an empty message (Sequence 0) when
// the subject has none.
func (s *Store) read(ctx context.Context, deadline time.Time, key string) (*jetstream.RawStreamMsg, error) {
	g := s.guard(ctx, deadline, 4)
	defer g.end()
	rctx := g.ctx
	m, err := s.kv.GetLastMsgForSubject(rctx, s.subject+key)
	if err != nil && ctx.Err() == nil && s.linkLost(rctx) {
		err = fmt.Errorf("%w: %w", errLinkLost, err)
	}
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return &jetstream.RawStreamMsg{}, nil
	}
	return m, err
}

func orNotFound(m *jetstream.RawStreamMsg) *jetstream.RawStreamMsg {
	if m == nil {
		return &jetstream.RawStreamMsg{}
	}
	return m
}

// ttlFor returns the per-message TTL of a held value: the lease TTL rounded
// up to whole seconds, or 0 (none) in observed mode.
func (s *Store) ttlFor(ttl time.Duration) time.Duration {
	if s.mode != ExpiryServer {
		return 0
	}
	return roundUpSecond(ttl)
}

// ttlMillis returns ttl rounded up to whole milliseconds, as records keep it.
func ttlMillis(ttl time.Duration) time.Duration {
	if r := ttl % time.Millisecond; r != 0 && ttl < 1<<62 {
		return ttl - r + time.Millisecond
	}
	return ttl
}

// validateTTL adds this store's TTL floor to err, a lease validation result.
func validateTTL(err error, ttl time.Duration) error {
	if err != nil {
		return err
	}
	if ttl < minTTL {
		return &lease.FieldError{Field: "TTL", Reason: fmt.Sprintf(
			"%v is below this store's minimum of %v (NATS per-message TTLs are whole seconds)", ttl, minTTL)}
	}
	return nil
}
