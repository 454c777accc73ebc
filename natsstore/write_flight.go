package natsstore

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/asterforge/aster/lease"
)

// flights coalesces a store's concurrent Acquires of one key. A release
// wakes every standby of the lease at once; when a process runs several of
// them (a singleton group with many candidates per instance), each would
// write, all but one be refused, and each then read the key and confirm the
// read, loading the server just when the new holder's write should be
// quick. Instead the first Acquire of the key runs (it "leads a flight") and
// the others wait for it, then take its outcome as their own when it
// answers them too:
//
//   - It took the key: every waiting claim of another term is held by the
//     new holder, which cannot release before its own Acquire returns. So
//     the key was so held at some moment during each waiting call.
//   - It found the key held by another: a waiting claim of another term is
//     held by that holder if it was waiting when the read that showed the
//     holder was sent, so that the read happened during its call.
//
// Any other outcome (an error, a key nobody holds that cannot be taken yet,
// a claim that joined after the read, a claim of the holder's own term)
// answers nobody else: the waiting claim then runs an Acquire of its own,
// which may lead the next flight.
//
// A waiting claim writes nothing, so the outcome it takes over is one its
// own call could have had: no claim is ever told it holds a lease it did
// not write, and "held" is only reported while it was true.
type flights struct {
	mu sync.Mutex
	in map[string]*flight // by key
}

// flight is one Acquire in progress. Its fields are guarded by flights.mu.
type flight struct {
	done   chan struct{}
	joined int // claims that joined it so far
	asked  int // claims that had joined when its last read was sent

	// Set before done closes. An outcome that answers no waiting claim
	// leaves holder empty.
	holder lease.Holder // who holds the key
	all    bool         // holder answers every claim that joined; otherwise the first asked
}

// join returns the flight of key in progress and the caller's place among
// the claims that joined it, or a new flight of key, which the caller leads,
// and 0.
func (fs *flights) join(key string) (*flight, int) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f, ok := fs.in[key]; ok {
		f.joined++
		return f, f.joined
	}
	if fs.in == nil {
		fs.in = make(map[string]*flight)
	}
	f := &flight{done: make(chan struct{})}
	fs.in[key] = f
	return f, 0
}

// reading says that f's Acquire is about to send a read whose answer it may
// report: the claims waiting now may take that answer. f may be nil (an
// Acquire that leads no flight).
func (fs *flights) reading(f *flight) {
	if f == nil {
		return
	}
	fs.mu.Lock()
	f.asked = f.joined
	fs.mu.Unlock()
}

// land ends f, the flight of key, with the outcome of its Acquire.
func (fs *flights) land(key string, f *flight, a lease.Acquisition, err error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	switch {
	case err != nil:
	case a.Acquired:
		l := a.Lease
		f.holder, f.all = lease.Holder{OwnerID: l.OwnerID, Term: l.Term, Token: l.Token, TTL: l.TTL, Meta: l.Meta}, true
	case a.Holder.OwnerID != "":
		f.holder = a.Holder
	}
	delete(fs.in, key)
	close(f.done)
}

// answer returns f's outcome for the claim of term that joined it in place
// n, if it answers that claim. Call it once f is done.
func (f *flight) answer(term string, n int) (lease.Acquisition, bool) {
	if f.holder.OwnerID == "" || f.holder.Term == term || !f.all && n > f.asked {
		return lease.Acquisition{}, false
	}
	h := f.holder
	h.Meta = maps.Clone(h.Meta)
	return lease.Acquisition{Holder: h}, true
}

// coalesced acquires c (writing rec with ttl) as a flight of c.LeaseID, or
// takes the outcome of the flight already in progress when it answers c
// (see flights). The whole call, waits included, is bounded as c's own
// Acquire is: by ctx, or the store's timeout when ctx has no deadline.
func (w *writes) coalesced(ctx context.Context, c lease.Claim, rec record, ttl time.Duration) (lease.Acquisition, error) {
	deadline, err := w.begin(ctx)
	if err != nil {
		return lease.Acquisition{}, err
	}
	for {
		f, n := w.flights.join(c.LeaseID)
		if n == 0 {
			return w.leadFlight(ctx, deadline, c, rec, ttl, f)
		}
		if err := await(ctx, deadline, f.done); err != nil {
			return lease.Acquisition{}, unavailable(ctx, "acquire "+c.LeaseID+
				" (waiting for another claim's acquire of it in this store)", err)
		}
		if a, ok := f.answer(c.Term, n); ok {
			return a, nil
		}
	}
}

// leadFlight runs the Acquire of flight f and lands f with its outcome,
// also when the Acquire panics (a bug): its waiters then run their own,
// and later claims of the key are not left joining a flight that never
// lands.
func (w *writes) leadFlight(ctx context.Context, deadline time.Time, c lease.Claim, rec record, ttl time.Duration,
	f *flight) (a lease.Acquisition, err error) {
	defer func() { w.flights.land(c.LeaseID, f, a, err) }()
	return w.acquire(ctx, deadline, c, rec, ttl, f)
}

// await waits until done closes, ctx is done or deadline (if not zero)
// passes; it returns nil when done closed.
func await(ctx context.Context, deadline time.Time, done <-chan struct{}) error {
	var expired <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-expired:
		return context.DeadlineExceeded
	}
}
