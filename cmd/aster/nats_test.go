package main

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/monitor"
	"github.com/asterforge/aster/natsstore"
	"github.com/asterforge/aster/supervision"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// store opens a lease store on url; the test closes it.
func store(t *testing.T, url, bucket string, d ...natsstore.DialOptions) *natsstore.Store {
	t.Helper()
	var opts natsstore.DialOptions
	if len(d) > 0 {
		opts = d[0]
	}
	opts.URLs = []string{url}
	s, err := natsstore.Dial(ctxT(t), opts, natsstore.Config{Bucket: bucket})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func take(t *testing.T, s *natsstore.Store, id, owner string, meta map[string]string) lease.Lease {
	t.Helper()
	a, err := s.Acquire(ctxT(t), lease.Claim{LeaseID: id, OwnerID: owner, Term: lease.NewTerm(), TTL: 10 * time.Second, Meta: meta})
	require.NoError(t, err)
	require.True(t, a.Acquired)
	return a.Lease
}

func TestLeases(t *testing.T) {
	srv := natstest.Start(t)
	env := map[string]string{"NATS_URL": srv.ClientURL()}
	s := store(t, srv.ClientURL(), "billing")
	outbox := take(t, s, "billing.outbox", "pod-a", map[string]string{"addr": "10.0.0.7:8080", "version": "1.4.2"})
	done := take(t, s, "billing.reports", "pod-b", nil)
	require.NoError(t, s.Release(ctxT(t), done))

	r := aster(t, env, "leases", "--bucket", "billing")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Empty(t, r.stderr)
	rows := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, rows, 3)
	assert.Regexp(t, `^LEASE\s+STATE\s+OWNER\s+META\s+TERM\s+TOKEN\s+AGE\s+VALID LEFT\s+EXPIRY$`, rows[0])
	assert.Regexp(t, `^billing.outbox\s+held\s+pod-a\s+addr=10.0.0.7:8080,version=1.4.2\s+`+outbox.Term+`\s+`+
		`\d+\s+\d+(\.\d+)?m?s\s+\d+(\.\d+)?m?s\s+server$`, rows[1])
	assert.Regexp(t, `^billing.reports\s+released\s+pod-b\s+-\s+`+done.Term+`\s+\d+\s+\S+\s+-\s+server$`, rows[2])

	// The bucket as an argument: deprecated, still the same table.
	byArg := aster(t, env, "leases", "billing")
	require.Equal(t, 0, byArg.code, byArg.stderr)
	assert.Equal(t, "aster leases: the BUCKET argument is deprecated; use --bucket billing\n", byArg.stderr)
	assert.Equal(t, len(rows), len(strings.Split(strings.TrimSpace(byArg.stdout), "\n")))
	assert.Contains(t, byArg.stdout, "billing.outbox")
	byBoth := aster(t, env, "leases", "--bucket", "billing", "billing")
	require.Equal(t, 0, byBoth.code, byBoth.stderr)
	byBoth = aster(t, env, "leases", "--bucket", "billing", "other")
	assert.Equal(t, 2, byBoth.code)
	assert.Contains(t, byBoth.stderr, `aster leases: the bucket is "billing" or "other"? Name it once, with --bucket`)

	r = aster(t, env, "leases", "--json", "--bucket", "billing")
	require.Equal(t, 0, r.code, r.stderr)
	var got []leaseJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	require.Len(t, got, 2)
	assert.Equal(t, "billing.outbox", got[0].LeaseID)
	assert.Equal(t, "held", got[0].State)
	assert.Equal(t, "pod-a", got[0].OwnerID)
	assert.Equal(t, outbox.Term, got[0].Term)
	assert.Equal(t, uint64(outbox.Token), got[0].Token)
	assert.Equal(t, "10s", got[0].TTL)
	assert.Equal(t, map[string]string{"addr": "10.0.0.7:8080", "version": "1.4.2"}, got[0].Meta)
	assert.Equal(t, "server", got[0].Expiry)
	assert.Equal(t, got[0].Written.Add(10*time.Second), got[0].ExpiresAt)
	assert.NotEmpty(t, got[0].ValidLeft)
	assert.Equal(t, "released", got[1].State)

	r = aster(t, env, "leases", "--bucket", "nothing_here")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, `aster leases: bucket "nothing_here" not found on `+srv.ClientURL())

	_ = store(t, srv.ClientURL(), natsstore.DefaultBucket)
	r = aster(t, env, "leases")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "no leases in bucket \"aster_leases\"\n", r.stdout)
	r = aster(t, env, "leases", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "[]\n", r.stdout)
}

func TestWatch(t *testing.T) {
	srv := natstest.Start(t)
	s := store(t, srv.ClientURL(), natsstore.DefaultBucket)

	for _, asJSON := range []bool{false, true} {
		id := "watched.plain"
		if asJSON {
			id = "watched.json"
		}
		out := newLines()
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan int, 1)
		args := []string{"watch", id, "--count", "4", "--server", srv.ClientURL()}
		if asJSON {
			args = append(args, "--json")
		}
		go func() { done <- run(ctx, args, func(string) string { return "" }, out, out) }()

		first := out.next(t) // the current state: never written
		a := take(t, s, id, "pod-a", map[string]string{"addr": "10.0.0.7:8080"})
		second := out.next(t)
		a, err := s.Renew(ctxT(t), a) // not a handover: nothing printed
		require.NoError(t, err)
		require.NoError(t, s.Release(ctxT(t), a))
		third := out.next(t)
		b := take(t, s, id, "pod-b", nil)
		fourth := out.next(t)
		require.Equal(t, 0, <-done, "exits after --count lines")
		cancel()

		if !asJSON {
			assert.Regexp(t, `^\d\d:\d\d:\d\d\.\d{3}  watched.plain  free$`, first)
			assert.Regexp(t, `^\d\d:\d\d:\d\d\.\d{3}  watched.plain  held by pod-a  token \d+  term `+a.Term+
				`  ttl 10s  meta addr=10.0.0.7:8080$`, second)
			assert.Regexp(t, `  watched.plain  free \(was pod-a, token `+regexp.QuoteMeta(tokenString(a.Token))+`\)$`, third)
			assert.Regexp(t, `  held by pod-b  token `+tokenString(b.Token)+`  term `+b.Term+`  ttl 10s  meta -$`, fourth)
			continue
		}
		var obs []observationJSON
		for _, line := range []string{first, second, third, fourth} {
			var o observationJSON
			require.NoError(t, json.Unmarshal([]byte(line), &o), line)
			obs = append(obs, o)
		}
		assert.False(t, obs[0].Held)
		assert.Equal(t, uint64(0), obs[0].Revision)
		assert.Equal(t, observationJSON{Time: obs[1].Time, LeaseID: id, Held: true, OwnerID: "pod-a", Term: a.Term,
			Token: uint64(a.Token), TTL: "10s", Meta: map[string]string{"addr": "10.0.0.7:8080"}, Revision: uint64(a.Token)}, obs[1])
		assert.Nil(t, obs[1].From, "no holder before")
		assert.False(t, obs[2].Held)
		assert.Equal(t, &holderJSON{OwnerID: "pod-a", Token: uint64(a.Token)}, obs[2].From, "free: who it was")
		assert.Equal(t, "pod-b", obs[3].OwnerID)
		assert.Equal(t, uint64(b.Token), obs[3].Token)
		assert.Nil(t, obs[3].From, "after a free lease, no handover")
	}

	// Interrupted: exit status 0.
	ctx, cancel := context.WithCancel(t.Context())
	out := newLines()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"watch", "x", "--server", srv.ClientURL()}, func(string) string { return "" }, out, out)
	}()
	out.next(t)
	cancel()
	assert.Equal(t, 0, <-done)
}

func tokenString(tk lease.Token) string { return strconv.FormatUint(uint64(tk), 10) }

// instanceOf registers a monitor.Registry's micro service on url.
func instanceOf(t *testing.T, url string, reg *monitor.Registry) {
	t.Helper()
	nc, err := nats.Connect(url)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	svc, err := reg.Service(nc, monitor.ServiceConfig{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = svc.Stop() })
}

type fixed actors.Status

func (f fixed) Status() actors.Status { return actors.Status(f) }

func (f fixed) Tree() *supervision.Tree { return nil }

type locks int

func (l locks) Held() int { return int(l) }

type frozen supervision.Snapshot

func (f frozen) Snapshot() supervision.Snapshot { return supervision.Snapshot(f) }

type stoppedStore struct{ err error }

func (s stoppedStore) Err() error { return s.err }

// A store's row says whether it works, the events it reported, and why it
// stopped; a stopped store makes the instance not ready.
func TestStatusShowsStores(t *testing.T) {
	srv := natstest.Start(t)
	reg := monitor.New(monitor.Config{Instance: "pod-a"})
	reg.AddStore("leases", stoppedStore{})
	reg.StoreEvent("leases", natsstore.WatchStalled{Bucket: "leases", Key: "a"})
	reg.StoreEvent("leases", natsstore.WatchStalled{Bucket: "leases", Key: "b"})
	reg.StoreEvent("leases", natsstore.ServerIsolated{Bucket: "leases"})
	reg.AddStore("locks", stoppedStore{err: errors.New(`natsstore: bucket "locks" is unusable (deleted)`)})
	instanceOf(t, srv.ClientURL(), reg)

	r := aster(t, map[string]string{"NATS_URL": srv.ClientURL()}, "status")
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 6, r.stdout)
	assert.Regexp(t, `^pod-a\s+\S+\s+NOT LIVE\s+store leases\s+ok\s+-\s+-\s+-\s+`+
		`events: ServerIsolated 1, WatchStalled 2\s+-$`, lines[1])
	assert.Regexp(t, `^pod-a\s+\S+\s+NOT LIVE\s+store locks\s+STOPPED\s+-\s+-\s+-\s+no events\s+`+
		`natsstore: bucket "locks" is unusable \(deleted\)$`, lines[2])
	assert.Equal(t, "problems:", lines[4])
	// A store stopped for good fails the liveness check (67fae3e): only a
	// restart opens it again.
	assert.Equal(t, `  pod-a [live] store locks: stopped for good, a restart is needed: natsstore: bucket "locks" is unusable `+
		`(deleted)`, lines[5])
}

func TestStatusAndTree(t *testing.T) {
	srv := natstest.Start(t)
	env := map[string]string{"NATS_URL": srv.ClientURL()}

	r := aster(t, env, "status", "--wait", "100ms")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, `aster status: no instance of service "aster" answered within 100ms`)

	now := time.Now()
	a := monitor.New(monitor.Config{Instance: "pod-a"})
	a.AddSupervisor(fixed(actors.Status{LeaseID: "billing.outbox", OwnerID: "pod-a", State: actors.StateLeading,
		Since: now.Add(-time.Minute), Term: "t1", Token: 42, ValidUntil: now.Add(8 * time.Second), RenewedAt: now}))
	a.AddTree(frozen(supervision.Snapshot{Name: "jobs", Path: "jobs", Kind: supervision.KindSupervisor,
		State: supervision.StateRunning, Children: []supervision.Snapshot{
			{Name: "mailer", Path: "jobs/mailer", Kind: supervision.KindFunc, State: supervision.StateRunning, Incarnation: 1},
		}}))
	b := monitor.New(monitor.Config{Instance: "pod-b"})
	b.AddSupervisor(fixed(actors.Status{LeaseID: "billing.outbox", OwnerID: "pod-b", State: actors.StateStandby,
		Since: now.Add(-time.Minute), Holder: lease.Holder{OwnerID: "pod-a", Term: "t1", Token: 42}, Stuck: 1,
		Token: 7, ResumableUntil: now.Add(time.Minute),
		LastError: "actors: workload did not stop in time (token 7)"}))
	a.AddLocker("invoices", locks(2))
	b.AddLocker("invoices", locks(0))
	instanceOf(t, srv.ClientURL(), a)
	instanceOf(t, srv.ClientURL(), b)

	r = aster(t, env, "status")
	require.Equal(t, 0, r.code, r.stderr) // an unhealthy instance is reported, not an error
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.GreaterOrEqual(t, len(lines), 7, r.stdout)
	assert.Regexp(t, `^INSTANCE\s+ID\s+HEALTH\s+LEASE\s+STATE\s+SINCE\s+TOKEN\s+VALID LEFT\s+HOLDER\s+LAST ERROR$`, lines[0])
	assert.Regexp(t, `^pod-a\s+\S+\s+ok\s+billing.outbox\s+leading\s+1m\d+s ago\s+42\s+\d(\.\d)?s\s+-\s+-$`, lines[1])
	assert.Regexp(t, `^pod-a\s+\S+\s+ok\s+locks invoices\s+2 held\s+`, lines[2])
	assert.Regexp(t, `^pod-a\s+\S+\s+ok\s+tree jobs\s+\(aster tree pod-a\)`, lines[3])
	assert.Regexp(t, `^pod-b\s+\S+\s+NOT LIVE\s+billing.outbox\s+standby \(1 stuck; token 7 lapsed, resumable for \d+s\)\s+1m\d+s ago\s+-\s+-\s+`+
		`pod-a \(token 42\)\s+actors: workload did not stop in time \(token 7\)$`, lines[4])
	assert.Equal(t, "", lines[5], "pod-b holds no lock: no line")
	assert.Equal(t, "problems:", lines[6])
	assert.Equal(t, "  pod-b [live] lease billing.outbox: workloads of earlier terms did not stop (1); no term starts "+
		"until they do (last error: actors: workload did not stop in time (token 7))", lines[7])

	r = aster(t, env, "status", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var reps []reportJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &reps))
	require.Len(t, reps, 2)
	assert.Equal(t, "pod-a", reps[0].Instance)
	assert.True(t, reps[0].Live)
	assert.Equal(t, "pod-b", reps[1].Instance)
	assert.False(t, reps[1].Live)

	r = aster(t, env, "tree", "pod-a")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "pod-a:\njobs (supervisor, one-for-one) running\n└── mailer (func, permanent) running incarnation=1\n", r.stdout)

	r = aster(t, env, "tree", "pod-b")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "pod-b runs no supervision tree\n", r.stdout)

	r = aster(t, env, "tree", "pod-a", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var tr treesJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &tr))
	require.Len(t, tr.Trees, 1)
	assert.Equal(t, "jobs", tr.Trees[0].Name)

	r = aster(t, env, "tree", "pod-z")
	assert.Equal(t, 1, r.code)
	assert.Regexp(t, `aster tree: no instance named "pod-z"; the instances are: pod-a \(\S+\), pod-b \(\S+\)`, r.stderr)

	// Two processes with one name: name one by its ID.
	instanceOf(t, srv.ClientURL(), monitor.New(monitor.Config{Instance: "pod-a"}))
	r = aster(t, env, "tree", "pod-a")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, `aster tree: 2 instances are named "pod-a"; name one by its ID: `)
	id := strings.TrimSpace(r.stderr[strings.LastIndex(r.stderr, " "):])
	r = aster(t, env, "tree", id)
	require.Equal(t, 0, r.code, r.stderr)
}

func TestDev(t *testing.T) {
	dir := t.TempDir()
	for _, asJSON := range []bool{false, true} {
		ctx, cancel := context.WithCancel(t.Context())
		out := newLines()
		ready := make(chan string, 1)
		c := &cli{getenv: func(string) string { return "" }, stdout: out, stderr: out, store: dir, host: "127.0.0.1",
			json: asJSON, devReady: func(url string) { ready <- url }}
		done := make(chan error, 1)
		go func() { done <- runDev(ctx, c, nil) }()
		var url string
		select {
		case url = <-ready:
		case err := <-done:
			t.Fatal(err)
		}
		if asJSON {
			var got map[string]string
			var text strings.Builder
			for line := out.next(t); ; line = out.next(t) {
				text.WriteString(line)
				if line == "}" {
					break
				}
			}
			require.NoError(t, json.Unmarshal([]byte(text.String()), &got))
			assert.Equal(t, map[string]string{"url": url, "store_dir": dir}, got)
		} else {
			assert.Equal(t, "NATS with JetStream on "+url+", store "+dir, out.next(t))
			assert.Contains(t, out.next(t), "connect with NATS_URL="+url)
		}

		// A service can use it, and aster can read what it wrote.
		s := store(t, url, natsstore.DefaultBucket)
		take(t, s, "dev.lease."+map[bool]string{false: "a", true: "b"}[asJSON], "pod-a", nil)
		r := aster(t, map[string]string{"NATS_URL": url}, "leases")
		require.Equal(t, 0, r.code, r.stderr)
		assert.Contains(t, r.stdout, "dev.lease.a", "kept in the store directory across restarts")
		require.NoError(t, s.Close())

		cancel()
		require.NoError(t, <-done)
	}

	// The port is taken.
	srv := natstest.Start(t)
	port := srv.ClientURL()[strings.LastIndex(srv.ClientURL(), ":")+1:]
	r := aster(t, nil, "dev", "--port", port, "--store", t.TempDir())
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "aster dev: start NATS: ")
	assert.Contains(t, r.stderr, "(is port "+port+" taken? Choose another with --port)")
}
