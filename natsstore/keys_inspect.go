package natsstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/asterforge/aster/lease"
)

var _ lease.Reader = (*Store)(nil)

// Read implements lease.Reader: who holds leaseID, read from the stream
// leader without taking the lease, for lease.Leader and lease.Observe. A
// key that is empty, released, expired, deleted or purged is free (Held
// false); a value that is not a lease is held by an empty Holder. It writes
// nothing.
func (s *Store) Read(ctx context.Context, leaseID string) (lease.Observation, error) {
	if err := lease.ValidateLeaseID(leaseID); err != nil {
		return lease.Observation{}, err
	}
	deadline, err := s.writes.begin(ctx)
	if err != nil {
		return lease.Observation{}, err
	}
	rctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	m, sent, err := s.writes.getLast(rctx, s.subject+leaseID)
	o := lease.Observation{LeaseID: leaseID, Seen: time.Now()}
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		m = &jetstream.RawStreamMsg{}
	case err != nil:
		return o, s.writes.fail(rctx, "read "+leaseID, err)
	}
	if err := s.writes.current(rctx, deadline, "read "+leaseID, sent); err != nil {
		return lease.Observation{LeaseID: leaseID}, err
	}
	if m.Sequence == 0 {
		return o, nil
	}
	o.Revision = m.Sequence
	if m.Header.Get(hdrOperation) != "" || m.Header.Get(hdrMarkerReason) != "" {
		return o, nil // a marker: released, expired, deleted or purged
	}
	o.Held = true
	if r, err := parseRecord(m.Data); err == nil && r.Kind == kindHeld {
		o.Holder = r.holder(m.Sequence)
	}
	return o, nil
}

// KeyState is what a key of the bucket holds, as Leases reports it. The
// zero value, KeyUnknown, is never reported.
type KeyState uint8

const (
	// KeyUnknown is the safe zero value.
	KeyUnknown KeyState = iota
	// KeyHeld: a lease, held until it is released or expires.
	KeyHeld
	// KeyReleased: its holder released it; it is free.
	KeyReleased
	// KeyExpired: the server removed it when its TTL ran out; it is free.
	KeyExpired
	// KeyDeleted: deleted by hand (nats kv del) or through the stream API.
	// Contenders wait the bucket's maximum lease TTL (Store.MaxTTL) from
	// when they see it vanish before they take it: its last holder may
	// still be acting.
	KeyDeleted
	// KeyPurged: purged by hand (nats kv purge). Contenders wait as for
	// KeyDeleted.
	KeyPurged
	// KeyCorrupt: a value that is not a lease this package wrote. Nobody
	// can take the lease until an operator deletes the key.
	KeyCorrupt
)

var keyStateNames = [...]string{"unknown", "held", "released", "expired", "deleted", "purged", "corrupt"}

func (s KeyState) String() string {
	if int(s) < len(keyStateNames) {
		return keyStateNames[s]
	}
	return fmt.Sprintf("KeyState(%d)", uint8(s))
}

// MarshalText implements encoding.TextMarshaler.
func (s KeyState) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// LeaseInfo describes one key of the bucket: what an operator asks about a
// lease (who holds it, since when, with which token) without decoding the
// raw value.
type LeaseInfo struct {
	LeaseID string
	State   KeyState
	// Holder is who holds the lease (KeyHeld), or who released it
	// (KeyReleased; its TTL is 0); zero otherwise.
	Holder lease.Holder
	// Acquired is when the holder acquired the lease, by the holder's
	// clock: for people only; expiry is never judged by it. Zero when
	// unknown.
	Acquired time.Time
	// Written is when the server stored the key's last message (the last
	// renewal of a held lease), by the server's clock.
	Written time.Time
	// Revision is the key's revision: the bucket's sequence number of its
	// last message.
	Revision uint64
	// Problem says why a KeyCorrupt value is not a lease.
	Problem string
}

// ExpiresAt returns when a held lease expires unless renewed: Written plus
// the holder's TTL, by the server's clock. A contender that has seen the
// write takes the lease about then (it counts the TTL on its own clock from
// when it saw the write); the server itself removes the value only after
// Config.ExpiryGrace more. Zero when not held, and for a lease held under a
// session (Holder.Session), which lasts as long as its session does.
func (i LeaseInfo) ExpiresAt() time.Time {
	if i.State != KeyHeld || i.Written.IsZero() || i.Holder.Session != "" {
		return time.Time{}
	}
	return i.Written.Add(i.Holder.TTL)
}

// Leases lists every key of the bucket with what it holds, sorted by lease
// ID: held leases, and the markers that releases, expiries and operators
// leave behind (until the server removes them, after MarkerTTL). It reads
// the bucket with one watch of all its keys (the permission a Watch needs)
// and writes nothing. A key that is not a lease is listed as KeyCorrupt
// with the reason; it does not make Leases fail.
func (s *Store) Leases(ctx context.Context) ([]LeaseInfo, error) {
	deadline, err := s.writes.begin(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	w, err := s.kv.Watch(ctx, ">")
	if err != nil {
		return nil, s.writes.fail(ctx, "list leases", err)
	}
	defer func() { _ = w.Stop() }()
	var out []LeaseInfo
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, s.writes.fail(ctx, "list leases", errors.New("the watch of the bucket ended"))
			}
			if e == nil { // every key has been reported
				slices.SortFunc(out, func(a, b LeaseInfo) int { return strings.Compare(a.LeaseID, b.LeaseID) })
				return out, nil
			}
			info, err := s.inspect(ctx, e)
			if err != nil {
				return nil, err
			}
			out = append(out, info)
		case <-ctx.Done():
			return nil, s.writes.fail(ctx, "list leases", ctx.Err())
		}
	}
}

// inspect describes one entry of the bucket.
func (s *Store) inspect(ctx context.Context, e jetstream.KeyValueEntry) (LeaseInfo, error) {
	info := LeaseInfo{LeaseID: e.Key(), Revision: e.Revision(), Written: e.Created()}
	switch e.Operation() {
	case jetstream.KeyValuePut:
		r, err := parseRecord(e.Value())
		switch {
		case err != nil:
			info.State, info.Problem = KeyCorrupt, err.Error()
		case r.Kind != kindHeld:
			info.State, info.Problem = KeyCorrupt, "a "+r.Kind.String()+" record outside a delete marker"
		default:
			info.State, info.Holder = KeyHeld, r.holder(e.Revision())
			if r.Acquired > 0 {
				info.Acquired = time.UnixMilli(r.Acquired)
			}
		}
	case jetstream.KeyValueDelete:
		info.State = KeyDeleted
		if r, err := parseRecord(e.Value()); err == nil && r.Kind == kindReleased {
			info.State = KeyReleased
			info.Holder = lease.Holder{OwnerID: r.Owner, Term: r.Term, Token: lease.Token(r.Token)}
			if r.Acquired > 0 {
				info.Acquired = time.UnixMilli(r.Acquired)
			}
		}
	case jetstream.KeyValuePurge:
		// An expiry marker and a purge look alike in a watch; the marker's
		// headers tell them apart.
		info.State = KeyPurged
		m, err := s.kv.GetLastMsgForSubject(ctx, s.subject+e.Key())
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound): // gone since: the marker's own TTL ran out
		case err != nil:
			return info, s.writes.fail(ctx, "list leases: read "+e.Key(), err)
		case m.Sequence == e.Revision() && m.Header.Get(hdrMarkerReason) == reasonMaxAge:
			info.State = KeyExpired
		}
	}
	return info, nil
}
