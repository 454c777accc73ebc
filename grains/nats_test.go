//go:build !race

// The tests of several members in one process: protoactor-go's
// remote.Start writes grpc's global logger (grpclog.SetLoggerV2) while
// the gRPC servers of the members started before read it, which the race
// detector reports whatever the test does. Run them with
// go test -count=1 ./grains (without -race); single_test.go runs one
// member under -race.

package grains_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/grains"
	"github.com/asterforge/aster/internal/natstest"
)

func TestCallsReachOneActivationPerIdentity(t *testing.T) {
	srv := natstest.Start(t)
	ck := newChecker()
	ms := []*testMember{startMember(t, srv, ck, fast), startMember(t, srv, ck, fast)}
	require.Eventually(t, func() bool { return len(ms[0].m.Members()) == 2 && len(ms[1].m.Members()) == 2 },
		5*time.Second, 10*time.Millisecond, "members see each other")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for round := 1; round <= 3; round++ {
		for i := range 10 {
			id := fmt.Sprintf("c%d", i)
			n, err := ms[(i+round)%2].call(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, int64(round), n, id)
		}
	}
	for i := range 10 {
		assert.Len(t, ck.activations(fmt.Sprintf("c%d", i)), 1)
	}
	assert.Empty(t, ck.overlaps())
	_, err := ms[0].m.Request(ctx, "nope", "x", nil)
	assert.ErrorIs(t, err, grains.ErrUnknownKind)
}

// TestCutOffMemberNeverRunsBesideItsSuccessor cuts a member off from NATS
// (its proxy frozen: renewals go unanswered, as after a kill or a
// partition) while another member keeps calling its identities: they move
// once its session has ended, and no two activations of an identity ever
// handle messages at once.
func TestCutOffMemberNeverRunsBesideItsSuccessor(t *testing.T) {
	srv := natstest.Start(t)
	ck := newChecker()
	ms := []*testMember{startMember(t, srv, ck, fast), startMember(t, srv, ck, fast), startMember(t, srv, ck, fast)}
	require.Eventually(t, func() bool {
		return len(ms[0].m.Members()) == 3 && len(ms[1].m.Members()) == 3 && len(ms[2].m.Members()) == 3
	}, 5*time.Second, 10*time.Millisecond, "members see each other")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	const n = 24
	onVictim := 0
	for i := range n {
		_, err := ms[0].call(ctx, fmt.Sprintf("c%d", i))
		require.NoError(t, err)
		if ck.activations(fmt.Sprintf("c%d", i))[0].member == ms[2].m.ID() {
			onVictim++
		}
	}
	require.NotZero(t, onVictim, "some identities run on the member cut off")

	ms[2].proxy.Freeze(true) // renewals go unanswered from now on
	defer ms[2].proxy.Freeze(false)
	start := time.Now()
	for time.Since(start) < 3*fast.TTL {
		for i := range n {
			cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
			began := time.Now()
			_, err := ms[(i%2)].call(cctx, fmt.Sprintf("c%d", i))
			ccancel()
			require.NoError(t, err, "c%d, %v after the call began, %v after the cut", i, time.Since(began), time.Since(start))
		}
	}
	moved := 0
	for i := range n {
		acts := ck.activations(fmt.Sprintf("c%d", i))
		last := acts[len(acts)-1]
		assert.NotEqual(t, ms[2].m.ID(), last.member, "c%d still on the member cut off", i)
		if len(acts) > 1 {
			moved++
			for j := 1; j < len(acts); j++ {
				assert.Greater(t, acts[j].tenure.Token, acts[j-1].tenure.Token)
			}
		}
	}
	assert.Equal(t, onVictim, moved, "the identities of the member cut off moved, and only those")
	assert.Empty(t, ck.overlaps(), "two activations of one identity acted at once")
	assert.Zero(t, ck.stale, "writes refused by the fence")
}
