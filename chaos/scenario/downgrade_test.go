package scenario

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/chaos/harness"
	"github.com/asterforge/aster/chaos/record"
)

// TestServerDowngrade runs holders whose stores opened on a server with
// per-message TTLs (server expiry: a lease key carries its TTL, and the
// server removes it), then restarts the server, on the same port and store
// directory, without them, and kills the leader.
//
// There is one nats-server binary (v2.15.2), and nothing in it reports a
// lower JetStream API level (JSApiLevel is a constant) or ignores the TTL
// of a write. So the downgrade is made in the store directory: the server
// is stopped (SIGTERM), the bucket's stream configuration on disk loses
// what a server before 2.11 does not know (allow_msg_ttl,
// subject_delete_marker_ttl, and the API level the stream requires; see
// harness.DropMsgTTL), and the server is started again on it. It then runs
// the stream as such a server would: the lease keys written with a TTL no
// longer expire, no delete marker is written, and the stream reports no
// per-message TTLs. What it does not model: the server still reports API
// level 5 (a 2.10 server reports 0; natsstore's unit test
// TestCapabilitiesRecheckedAfterReconnect covers that signal), so the
// stores learn of the downgrade from the stream's configuration, which
// they check after every reconnect; and a write that asks for a TTL is
// refused ("per-message TTL is disabled") where a 2.10 server stores it and
// ignores the TTL (natsstore's fallback_test.go covers that).
//
// The stores must fall back to observed expiry (an ExpiryFallback event in
// every holder that saw the restart), the leases must keep being renewed,
// and the killed leader's lease must be taken over by a standby that has
// seen it unchanged for its TTL, since the server no longer removes it.
func TestServerDowngrade(t *testing.T) {
	e := newEnv(t, "server-downgrade")
	n := rounds(1, 10)
	e.startN(candidates)
	e.current()
	for name, h := range e.holders {
		require.NotContains(t, h.proc.Output(), "ExpiryFallback", "%s fell back before the downgrade", name)
	}

	e.mark(record.MarkBucket, "", "server stopped; restarted without per-message TTLs")
	require.NoError(t, e.nats.Stop())
	require.NoError(t, harness.DropMsgTTL(e.nats.StoreDir(), "KV_"+bucket))
	require.NoError(t, e.nats.Start())
	e.mark(record.MarkServerStart, "", "without per-message TTLs")
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var allow bool
	require.Eventually(t, func() bool {
		s, err := e.jetStream().Stream(ctx, "KV_"+bucket)
		if err != nil {
			return false
		}
		allow = s.CachedInfo().Config.AllowMsgTTL
		return true
	}, limit, 50*time.Millisecond, "the stream after the restart")
	require.False(t, allow, "the restarted server still allows per-message TTLs")
	before := len(e.holders)
	for name, h := range e.holders {
		require.NoError(t, h.proc.AwaitOutput("store event: natsstore.ExpiryFallback", 1, limit), "%s", name)
	}
	h, token := e.current()
	for range n {
		time.Sleep(jitter(renew))
		e.kill(h, "idle, after the downgrade")
		e.start()
		h, token = e.leader(token)
	}
	falls := 0
	for _, h := range e.holders {
		falls += strings.Count(h.proc.Output(), "store event: natsstore.ExpiryFallback")
	}
	e.finish("nats-server stopped and restarted on the same store without per-message TTLs (the stream "+
		"configuration of a server before 2.11), then SIGKILL of the leader", n,
		fmt.Sprintf("%d ExpiryFallback events, from the %d stores open at the restart and the %d opened after it",
			falls, before, len(e.holders)-before),
		string(record.MarkKill))
}
