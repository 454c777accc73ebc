package natstest_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
)

// An isolated server keeps its clients but loses the cluster: the majority
// side elects leaders and takes writes, the isolated side cannot, and
// healing the partition joins it again.
func TestPartitionIsolatesServer(t *testing.T) {
	c, p := natstest.StartPartitionedCluster(t, 3)
	_, js0 := connect(t, c.Servers[0].ClientURL())
	_, js1 := connect(t, c.Servers[1].ClientURL())
	kv0, err := js0.CreateKeyValue(ctxT(t), jetstream.KeyValueConfig{Bucket: "r3", Replicas: 3, Storage: jetstream.FileStorage})
	require.NoError(t, err)
	kv1, err := js1.KeyValue(ctxT(t), "r3")
	require.NoError(t, err)
	_, err = kv0.Put(ctxT(t), "k", []byte("before"))
	require.NoError(t, err)

	p.Isolate(c.Servers[0])
	require.True(t, c.Servers[0].Running(), "an isolated server keeps running")
	require.Eventually(t, func() bool { return c.Servers[0].NATS().NumRoutes() == 0 }, 10*time.Second,
		10*time.Millisecond, "the isolated server keeps no route")
	put := func(kv jetstream.KeyValue) error {
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		_, err := kv.Put(ctx, "k", []byte("v"))
		return err
	}
	require.Eventually(t, func() bool { return put(kv1) == nil }, 30*time.Second, 50*time.Millisecond,
		"the majority side takes writes")
	require.Error(t, put(kv0), "the isolated side cannot commit a write")

	p.Heal()
	c.WaitReady(t)
	require.Eventually(t, func() bool { return put(kv0) == nil }, 30*time.Second, 50*time.Millisecond,
		"the healed server takes writes again")
}
