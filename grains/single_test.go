package grains_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/asterforge/aster/grains"
	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// TestOneMemberActivatesWithAToken runs one member on a real nats-server:
// each identity is activated once, its grain reads its token from its
// context, an unknown kind fails at once, and a member cut off from NATS
// refuses its grains' messages once its session is past its renew
// deadline, and activates them again with a larger token when it is back.
func TestOneMemberActivatesWithAToken(t *testing.T) {
	srv := natstest.Start(t)
	ck := newChecker()
	m := startMember(t, srv, ck, fast)
	require.Eventually(t, func() bool { return len(m.m.Members()) == 1 }, 5*time.Second, 10*time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for round := 1; round <= 2; round++ {
		for i := range 5 {
			n, err := m.call(ctx, fmt.Sprintf("c%d", i))
			require.NoError(t, err)
			assert.Equal(t, int64(round), n)
		}
	}
	first := ck.activations("c0")
	require.Len(t, first, 1)
	assert.NotZero(t, first[0].tenure.Token)

	_, err := m.m.Request(ctx, "nope", "x", nil)
	assert.ErrorIs(t, err, grains.ErrUnknownKind)
	_, err = m.m.Get(ctx, kind, string(make([]byte, 300)))
	assert.ErrorIs(t, err, lease.ErrInvalid, "an identity too long for a lease ID")

	m.proxy.Freeze(true)
	time.Sleep(fast.TTL) // past the session's renew deadline (TTL - 2 × TTL/10)
	short, scancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = m.call(short, "c0")
	scancel()
	require.Error(t, err, "a member cut off from NATS past its renew deadline answers no call")
	m.proxy.Freeze(false)
	n, err := m.call(ctx, "c0")
	require.NoError(t, err)
	assert.Equal(t, int64(3), n)
	acts := ck.activations("c0")
	require.Len(t, acts, 2)
	assert.Greater(t, acts[1].tenure.Token, acts[0].tenure.Token)
	assert.Empty(t, ck.overlaps())

	// StopMember leaves at once: the membership lease and the activation's
	// lock are released, not left to expire.
	id := m.m.ID()
	require.NoError(t, grains.StopMember(ctx, m.c))
	st, err := natsstore.Dial(ctx, natsstore.DialOptions{URLs: []string{srv.ClientURL()}}, natsstore.Config{})
	require.NoError(t, err)
	defer st.Close()
	for _, key := range []string{"test.members." + id, "test.grain." + kind + ".c0"} {
		o, err := st.Read(ctx, key)
		require.NoError(t, err)
		assert.False(t, o.Held, "%s is released", key)
		assert.NotZero(t, o.Revision, "%s was held", key)
	}
}

// TestLostMembershipStopsActivations deletes a member's membership lease by
// hand, as an operator might: its next renewal finds the key changed, the
// lease is lost, and the member stops every activation and releases its
// lock (the other members place those identities elsewhere once they see the
// lease gone).
func TestLostMembershipStopsActivations(t *testing.T) {
	srv := natstest.Start(t)
	stopped := make(chan string, 16)
	props := actor.PropsFromFunc(func(c actor.Context) {
		switch c.Message().(type) {
		case *actor.Stopped:
			if a, ok := grains.ActivationOf(c); ok {
				stopped <- a.Identity()
			}
		case *wrapperspb.StringValue:
			c.Respond(&wrapperspb.Int64Value{Value: 1})
		}
	})
	m := startMemberProps(t, srv, props)
	require.Eventually(t, func() bool { return len(m.m.Members()) == 1 }, 5*time.Second, 10*time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	ids := []string{"a", "b", "c"}
	for _, id := range ids {
		_, err := m.m.Request(ctx, kind, id, &wrapperspb.StringValue{Value: id})
		require.NoError(t, err)
	}
	select {
	case id := <-stopped:
		t.Fatalf("%s stopped before the membership lease was lost", id)
	default:
	}

	nc, err := nats.Connect(srv.ClientURL())
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	kv, err := js.KeyValue(ctx, natsstore.DefaultBucket)
	require.NoError(t, err)
	require.NoError(t, kv.Delete(ctx, "test.members."+m.m.ID()))

	var got []string
	deadline := time.After(2 * fast.TTL) // a renewal every RenewInterval finds the key deleted
	for len(got) < len(ids) {
		select {
		case id := <-stopped:
			got = append(got, id)
		case <-deadline:
			t.Fatalf("after the membership lease was lost, only %v of %v stopped", got, ids)
		}
	}
	assert.ElementsMatch(t, ids, got)
	st, err := natsstore.Dial(ctx, natsstore.DialOptions{URLs: []string{srv.ClientURL()}}, natsstore.Config{})
	require.NoError(t, err)
	defer st.Close()
	for _, id := range ids {
		require.Eventually(t, func() bool {
			o, err := st.Read(ctx, "test.grain."+kind+"."+id)
			return err == nil && !o.Held
		}, 2*fast.TTL, 10*time.Millisecond, "%s's lock is released", id)
	}
}

// refusingStore refuses the grains' locks while refuse is set, as a store
// whose user lost the permission to write them would.
type refusingStore struct {
	grains.Store
	refuse atomic.Bool
}

var errRefused = errors.New("refused for the test")

func (s *refusingStore) AcquireUnder(ctx context.Context, c lease.Claim, session lease.Lease) (lease.Acquisition, error) {
	if s.refuse.Load() && strings.Contains(c.LeaseID, ".grain.") {
		return lease.Acquisition{}, fmt.Errorf("%w: %w", lease.ErrUnavailable, errRefused)
	}
	return s.Store.AcquireUnder(ctx, c, session)
}

// TestActivationErrorNamesTheStoreError: a member that cannot take an
// identity's lock (its store refuses the write after the member started)
// answers a call with ErrNoActivation that carries the store's error, not
// a bare "no activation".
func TestActivationErrorNamesTheStoreError(t *testing.T) {
	srv := natstest.Start(t)
	var rs *refusingStore
	props := actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(*wrapperspb.StringValue); ok {
			c.Respond(&wrapperspb.Int64Value{Value: 1})
		}
	})
	m := startMemberOver(t, srv, props, fast, func(st grains.Store) grains.Store {
		rs = &refusingStore{Store: st}
		return rs
	})
	require.Eventually(t, func() bool { return len(m.m.Members()) == 1 }, 5*time.Second, 10*time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := m.m.Request(ctx, kind, "before", &wrapperspb.StringValue{})
	require.NoError(t, err)

	// The first lookup gives up before the acquisition does (it waits up
	// to Config.ActivationTimeout); a later one names its error.
	rs.refuse.Store(true)
	var last error
	require.Eventually(t, func() bool {
		short, scancel := context.WithTimeout(ctx, time.Second)
		defer scancel()
		_, last = m.m.Get(short, kind, "after")
		return last != nil && strings.Contains(last.Error(), errRefused.Error())
	}, 4*fast.TTL, 10*time.Millisecond, "the store's error never reached the caller: %v", last)
	require.ErrorIs(t, last, grains.ErrNoActivation)

	rs.refuse.Store(false)
	_, err = m.m.Request(ctx, kind, "after", &wrapperspb.StringValue{})
	require.NoError(t, err, "activated once the store takes the lock")
}
