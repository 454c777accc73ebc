package natsstore

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
)

// behindKV answers the first behind reads of key with old, as a stream
// leader just elected does before it has applied what it committed.
type behindKV struct {
	keyValue
	key    string
	old    *jetstream.RawStreamMsg
	behind atomic.Int32
}

func (k *behindKV) GetLastMsgForSubject(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	if subject == k.key && k.behind.Add(-1) >= 0 {
		return k.old, nil
	}
	return k.keyValue.GetLastMsgForSubject(ctx, subject)
}

// A renewal sent again after a copy went unanswered is refused as a
// conflict (errResent): the stream had the key past the revision the
// renewal expected. The read back that follows may still show that revision
// (a leader just elected answers before it has applied the first copy, which
// landed): it is read again, and the renewal is found. Only when no read
// shows it does the call go on to write again; a plain unknown outcome
// (no conflict) with the key unchanged is still "did not land (yet)".
func TestRenewalResentIsReadAgainPastABehindRead(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	s, err := Dial(t.Context(), DialOptions{URLs: []string{srv.ClientURL()}}, Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	conflict := &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence,
		Description: "wrong last sequence"}
	resent := errors.Join(errResent, conflict)

	for i, tc := range []struct {
		name   string
		werr   error
		land   bool  // the first copy landed
		taken  bool  // another term's write landed instead
		behind int32 // reads that show the key as it was
		done   bool
		rev    bool // done with the first copy's revision
		err    string
	}{
		{name: "landed, two reads behind", werr: resent, land: true, behind: 2, done: true, rev: true},
		{name: "not landed (a deposed leader refused)", werr: resent, behind: 100},
		{name: "timeout, unchanged", werr: context.DeadlineExceeded, behind: 1, done: true, err: "did not land (yet)"},
		// The reads behind never make a success of another term's write:
		// the call reads it once the reads catch up, and reports the lease
		// lost (ours is false).
		{name: "taken by another term, two reads behind", werr: resent, taken: true, behind: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := s.Acquire(t.Context(), claim("job"+strconv.Itoa(i), "owner-a"))
			require.NoError(t, err)
			held := l.Lease
			subject := s.subject + held.ID
			real := s.kv
			old, err := real.GetLastMsgForSubject(t.Context(), subject)
			require.NoError(t, err)

			rec := record{Kind: kindHeld, Owner: held.OwnerID, Term: held.Term, Token: uint64(held.Token),
				TTL: ttlMillis(held.TTL), Nonce: 42}
			w := &rewriting{op: "renew", l: held, rec: rec, deadline: time.Now().Add(5 * time.Second),
				expect: held.Revision, sent: []sentWrite{{nonce: 42, before: s.top.Load()}}}
			var landed uint64
			if tc.land || tc.taken {
				wrote := rec
				if tc.taken {
					wrote.Owner, wrote.Term, wrote.Nonce = "owner-b", "term-b", 7
				}
				ack, err := s.writes.publish(t.Context(), w.deadline, held.ID, wrote, held.Revision, 0)
				require.NoError(t, err)
				landed = ack.Sequence
			}
			bkv := &behindKV{keyValue: real, key: subject, old: old}
			bkv.behind.Store(tc.behind)
			s.kv = bkv
			defer func() { s.kv = real }()

			m, rev, done, err := s.writes.rewriteUnknown(t.Context(), w, tc.werr)
			assert.Equal(t, tc.done, done)
			switch {
			case tc.err != "":
				require.ErrorIs(t, err, lease.ErrUnavailable)
				assert.ErrorContains(t, err, tc.err)
			case tc.rev:
				require.NoError(t, err)
				assert.Equal(t, landed, rev)
			case tc.taken:
				require.NoError(t, err)
				require.NotNil(t, m)
				assert.Equal(t, landed, m.Sequence, "the other term's write, once the reads caught up")
				assert.False(t, ours(m, held), "the rewrite reports the lease lost")
			default:
				require.NoError(t, err)
				require.NotNil(t, m)
				assert.Equal(t, held.Revision, m.Sequence, "written again at the revision expected")
			}
		})
	}
}
