package monitor_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/monitor"
	"github.com/asterforge/aster/supervision"
)

// requestAll publishes a request on subject and collects the replies that
// arrive within wait.
func requestAll(t *testing.T, nc *nats.Conn, subject string, wait time.Duration) [][]byte {
	t.Helper()
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	require.NoError(t, err)
	defer func() { _ = sub.Unsubscribe() }()
	require.NoError(t, nc.PublishRequest(subject, inbox, nil))
	var out [][]byte
	deadline := time.Now().Add(wait)
	for {
		m, err := sub.NextMsg(time.Until(deadline))
		if err != nil {
			return out
		}
		out = append(out, m.Data)
	}
}

func TestServiceOverNATS(t *testing.T) {
	srv := natstest.Start(t)
	nc, err := nats.Connect(srv.ClientURL())
	require.NoError(t, err)
	defer nc.Close()

	now := time.Now()
	a := monitor.New(monitor.Config{Instance: "pod-a"})
	a.AddSupervisor(fixed(actors.Status{LeaseID: "billing.outbox", OwnerID: "pod-a", State: actors.StateLeading,
		Since: now, Token: 42, Term: "t42", ValidUntil: now.Add(9 * time.Second), RenewedAt: now}))
	a.AddTree(frozen(supervision.Snapshot{Name: "jobs", Path: "jobs", Kind: supervision.KindSupervisor, State: supervision.StateRunning}))
	b := monitor.New(monitor.Config{Instance: "pod-b"})
	b.AddSupervisor(fixed(actors.Status{LeaseID: "billing.outbox", OwnerID: "pod-b", State: actors.StateStandby,
		Holder: lease.Holder{OwnerID: "pod-a", Term: "t42", Token: 42, TTL: 10 * time.Second}}))

	svcA, err := a.Service(nc, monitor.ServiceConfig{})
	require.NoError(t, err)
	defer func() { require.NoError(t, svcA.Stop()) }()
	svcB, err := b.Service(nc, monitor.ServiceConfig{Version: "1.2.3"})
	require.NoError(t, err)
	defer func() { require.NoError(t, svcB.Stop()) }()

	// nats micro ls: every instance answers PING.
	var pings []micro.Ping
	for _, data := range requestAll(t, nc, "$SRV.PING.aster", time.Second) {
		var p micro.Ping
		require.NoError(t, json.Unmarshal(data, &p))
		pings = append(pings, p)
	}
	require.Len(t, pings, 2)
	instances := map[string]string{}
	for _, p := range pings {
		assert.Equal(t, "aster", p.Name)
		instances[p.Metadata[monitor.MetadataInstance]] = p.ID
	}
	assert.Contains(t, instances, "pod-a")
	assert.Contains(t, instances, "pod-b")

	// nats micro info aster <id>: the endpoints carry the instance's ID.
	msg, err := nc.Request("$SRV.INFO.aster."+instances["pod-b"], nil, 5*time.Second)
	require.NoError(t, err)
	var info micro.Info
	require.NoError(t, json.Unmarshal(msg.Data, &info))
	assert.Equal(t, "1.2.3", info.Version)
	assert.Equal(t, "Aster leases, locks and supervision trees of pod-b", info.Description)
	var subjects []string
	for _, ep := range info.Endpoints {
		subjects = append(subjects, ep.Subject)
		assert.Equal(t, "application/json", ep.Metadata["format"])
	}
	id := instances["pod-b"]
	assert.Equal(t, []string{"aster." + id + ".status", "aster." + id + ".leases", "aster." + id + ".tree"}, subjects)

	// nats req aster.<id>.status ''
	msg, err = nc.Request("aster."+instances["pod-a"]+".status", nil, 5*time.Second)
	require.NoError(t, err)
	var rep struct {
		Instance string `json:"instance"`
		Live     bool   `json:"live"`
		Ready    bool   `json:"ready"`
		Leases   []struct {
			LeaseID string `json:"lease_id"`
			State   string `json:"state"`
			Token   uint64 `json:"token"`
		} `json:"leases"`
		Trees []struct {
			Name string `json:"name"`
		} `json:"trees"`
	}
	require.NoError(t, json.Unmarshal(msg.Data, &rep))
	assert.Equal(t, "pod-a", rep.Instance)
	assert.True(t, rep.Live)
	assert.True(t, rep.Ready)
	require.Len(t, rep.Leases, 1)
	assert.Equal(t, "leading", rep.Leases[0].State)
	assert.Equal(t, uint64(42), rep.Leases[0].Token)
	require.Len(t, rep.Trees, 1)

	msg, err = nc.Request("aster."+instances["pod-a"]+".leases", nil, 5*time.Second)
	require.NoError(t, err)
	assert.NotContains(t, string(msg.Data), `"trees"`, "the leases endpoint leaves the trees out")
	assert.Contains(t, string(msg.Data), `"lease_id":"billing.outbox"`)

	msg, err = nc.Request("aster."+instances["pod-b"]+".leases", nil, 5*time.Second)
	require.NoError(t, err)
	assert.Contains(t, string(msg.Data), `"holder":{"owner_id":"pod-a","term":"t42","token":42,"ttl":"10s"}`)

	msg, err = nc.Request("aster."+instances["pod-a"]+".tree", nil, 5*time.Second)
	require.NoError(t, err)
	var trees struct {
		Instance string `json:"instance"`
		Trees    []struct {
			Name string `json:"name"`
			Text string `json:"text"`
		} `json:"trees"`
	}
	require.NoError(t, json.Unmarshal(msg.Data, &trees))
	assert.Equal(t, "pod-a", trees.Instance)
	require.Len(t, trees.Trees, 1)
	assert.Equal(t, "jobs", trees.Trees[0].Name)
	assert.True(t, strings.HasPrefix(trees.Trees[0].Text, "jobs (supervisor, one-for-one) running"), trees.Trees[0].Text)

	_, err = a.Service(nc, monitor.ServiceConfig{Name: "bad name"})
	assert.Error(t, err)
	_, err = a.Service(nil, monitor.ServiceConfig{})
	assert.Error(t, err)
}
