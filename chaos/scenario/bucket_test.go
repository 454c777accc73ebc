package scenario

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/chaos/check"
	"github.com/asterforge/aster/chaos/record"
)

// The scenarios of the bucket's failure model: operators and servers
// changing the bucket under running holders, through the JetStream API of
// the test process, as `nats stream purge`, `nats kv rm` and `nats stream
// edit` would, and a server restarted on an older copy of its store.

// streamPurge purges the lease key's subject from the bucket's stream
// ($JS.API.STREAM.PURGE.KV_<bucket> with a subject filter): the subject is
// left empty, without a marker.
func (e *env) streamPurge() {
	js := e.jetStream()
	e.operate(record.OpStreamPurge, record.MarkTamper, func(ctx context.Context) error {
		s, err := js.Stream(ctx, "KV_"+bucket)
		if err != nil {
			return err
		}
		return s.Purge(ctx, jetstream.WithPurgeSubject("$KV."+bucket+"."+e.lease))
	})
}

// deleteBucket deletes the leases bucket.
func (e *env) deleteBucket() {
	js := e.jetStream()
	e.operate(record.OpBucketGone, record.MarkBucket, func(ctx context.Context) error {
		e.kv = nil
		return js.DeleteKeyValue(ctx, bucket)
	})
}

// editBucket applies edit to the configuration of the bucket's stream and
// returns the configuration it had.
func (e *env) editBucket(typ record.OpType, edit func(*jetstream.StreamConfig)) jetstream.StreamConfig {
	js := e.jetStream()
	var before jetstream.StreamConfig
	do := func(ctx context.Context) error {
		s, err := js.Stream(ctx, "KV_"+bucket)
		if err != nil {
			return err
		}
		before = s.CachedInfo().Config
		cfg := before
		edit(&cfg)
		_, err = js.UpdateStream(ctx, cfg)
		return err
	}
	if typ == "" { // an operator's repair: not a change the model needs
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		e.mark(record.MarkBucket, "", "repaired")
		require.NoError(e.t, do(ctx))
		return before
	}
	e.operate(typ, record.MarkBucket, do)
	return before
}

// running returns the holders whose process runs.
func (e *env) running() []*holder {
	e.mu.Lock()
	defer e.mu.Unlock()
	var hs []*holder
	for _, h := range e.holders {
		if !h.proc.Exited() {
			hs = append(hs, h)
		}
	}
	return hs
}

// storeStopped is what a holder prints when its store stops for good
// (natsstore's BucketUnusable and SequenceRegression events).
const storeStopped = "the store stopped"

// awaitStopped waits up to limit for the store of every holder of hs to
// report that it stopped, and returns how many did.
func (e *env) awaitStopped(hs []*holder) int {
	deadline := time.Now().Add(limit)
	for {
		n := 0
		for _, h := range hs {
			if strings.Contains(h.proc.Output(), storeStopped) {
				n++
			}
		}
		if n == len(hs) || time.Now().After(deadline) {
			return n
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// terminate shuts hs down gracefully, as an operator restarting the
// instances does.
func (e *env) terminate(hs []*holder) {
	for _, h := range hs {
		_ = h.proc.Terminate(limit)
	}
}

// A stream purge of the leader's key (no marker): the leader's next renewal
// finds the key gone, and the standbys, which saw the key held, wait the
// bucket's longest TTL before they take it.
func TestStreamPurge(t *testing.T) {
	e := newEnv(t, "stream-purge")
	n := rounds(1, 10)
	e.startN(candidates)
	var token uint64
	for range n {
		_, token = e.leader(token)
		time.Sleep(renew + jitter(renew))
		e.streamPurge()
	}
	e.leader(token)
	e.finish("the leader's key purged from the stream with a subject filter (no marker left)", n, "",
		string(record.MarkTamper))
}

// Mixed TTLs: two holders with a 3 s TTL and two with 1 s, in a bucket whose
// maximum TTL is 3 s. The key is deleted while a 3 s holder leads: the 1 s
// holders must wait 3 s, not 1 s.
func TestDeleteMixedTTL(t *testing.T) {
	e := newEnv(t, "delete-mixed-ttl")
	long := 3 * time.Second
	e.extra = []string{"-max-ttl", long.String()}
	longs := map[string]bool{}
	for range 2 {
		longs[e.start("-ttl", long.String()).name] = true // the first creates the bucket (MaxTTL 3 s)
	}
	e.startN(2)
	n := rounds(1, 8)
	var token uint64
	for range n {
		var h *holder
		h, token = e.leader(token)
		for tries := 0; !longs[h.name] && tries < 10; tries++ {
			e.resign(h) // a 1 s holder steps down, until a 3 s holder leads
			h, token = e.leader(token)
		}
		require.True(t, longs[h.name], "a 3 s holder leads")
		time.Sleep(renew + jitter(renew))
		e.tamper(record.OpDelete)
	}
	e.leader(token)
	e.finish("the key deleted while a holder with a 3 s TTL leads; the others' TTL is 1 s (bucket maximum 3 s)", n, "",
		string(record.MarkTamper))
}

// The bucket deleted under running holders: their stores stop (the store
// never re-creates a bucket it opened); the instances are restarted one TTL
// later, and the first re-creates the bucket with natsstore, whose first
// revision is drawn from the clock: tokens never go back.
func TestBucketRecreate(t *testing.T) {
	e := newEnv(t, "bucket-recreate")
	n := rounds(1, 4)
	e.startN(candidates)
	var token uint64
	stopped, holders := 0, 0
	for range n {
		_, token = e.leader(token)
		time.Sleep(renew + jitter(renew))
		old := e.running()
		e.deleteBucket()
		stopped += e.awaitStopped(old)
		holders += len(old)
		time.Sleep(e.ttl) // every claim made before the deletion has run out
		e.terminate(old)
		e.startN(candidates) // the first creates the bucket again
	}
	e.leader(token)
	e.finish("the bucket deleted; every store stops; the instances restarted one TTL later re-create it", n,
		fmt.Sprintf("%d of %d stores reported the deletion and stopped", stopped, holders), string(record.MarkBucket))
}

// The bucket deleted and made again by hand (`nats kv add`), which restarts
// its revisions at 1, where a renewal of the old bucket could land on a new
// term's acquisition and tokens would go back. Every store that ran stops;
// a holder started on the new bucket refuses it, naming the fix; the
// operator follows it (a purge up to the current microsecond), and new
// holders lead with tokens above every earlier one.
func TestBucketRecreatedByHand(t *testing.T) {
	e := newEnv(t, "bucket-recreated-by-hand")
	e.lease = "chaos.by-hand"
	e.startN(candidates)
	_, token := e.leader(0)
	time.Sleep(renew)
	old := e.running()
	e.deleteBucket()
	stopped := e.awaitStopped(old)
	time.Sleep(e.ttl)
	e.terminate(old)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	js := e.jetStream()
	_, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, History: 1,
		Storage: jetstream.FileStorage, LimitMarkerTTL: time.Minute})
	require.NoError(t, err)
	e.mark(record.MarkBucket, "", "created by hand")

	// The holder retries its open (as a service would, until its
	// supervisor gives up): the first refusal is enough.
	h := e.launch()
	require.NoError(t, h.proc.AwaitOutput("did not start at a value drawn from the clock", 1, limit),
		"a holder opened the bucket made by hand: %s", h.proc.Output())
	require.NoError(t, h.proc.Kill())
	fix := regexp.MustCompile(`nats stream purge KV_\S+ --seq (\d+) -f`).FindStringSubmatch(h.proc.Output())
	require.NotNil(t, fix, "the refusal names no fix: %s", h.proc.Output())
	seq, err := strconv.ParseUint(fix[1], 10, 64)
	require.NoError(t, err)
	stream, err := js.Stream(ctx, "KV_"+bucket)
	require.NoError(t, err)
	require.NoError(t, stream.Purge(ctx, jetstream.WithPurgeSequence(seq)))
	e.mark(record.MarkBucket, "", "revisions moved past the clock")

	e.startN(candidates)
	e.leader(token)
	e.finish("the bucket deleted and made again by hand; every store stops; a new holder refuses the bucket and "+
		"names the fix; the fix applied and the instances restarted", 1,
		fmt.Sprintf("%d of %d stores reported the deletion and stopped; the refusal: %q", stopped, len(old),
			"its revisions did not start at a value drawn from the clock"), string(record.MarkBucket))
}

// The bucket edited to expire messages after 200 ms (a MaxAge, shorter than
// the renew interval): a held value is removed with a marker that looks
// like an expiry, which no store may trust. Every store stops; the operator
// removes the MaxAge, and the instances are restarted.
func TestBucketMaxAge(t *testing.T) {
	e := newEnv(t, "bucket-max-age")
	n := rounds(1, 3)
	e.startN(candidates)
	var token uint64
	stopped, holders := 0, 0
	for range n {
		_, token = e.leader(token)
		time.Sleep(renew + jitter(renew))
		old := e.running()
		before := e.editBucket(record.OpMaxAge, func(c *jetstream.StreamConfig) {
			c.MaxAge, c.Duplicates = 200*time.Millisecond, 200*time.Millisecond
		})
		stopped += e.awaitStopped(old)
		holders += len(old)
		e.editBucket("", func(c *jetstream.StreamConfig) { c.MaxAge, c.Duplicates = before.MaxAge, before.Duplicates })
		time.Sleep(e.ttl)
		e.terminate(old)
		e.startN(candidates)
	}
	e.leader(token)
	e.finish("the bucket edited to a 200 ms MaxAge; every store stops; the edit undone and the instances restarted", n,
		fmt.Sprintf("%d of %d stores reported the edit and stopped", stopped, holders), string(record.MarkBucket))
}

// snapshot copies the server's store directory while the server is frozen
// (SIGSTOP for the copy), as the disk would hold it before a lost fsync.
func (e *env) snapshot() string {
	e.t.Helper()
	dir := filepath.Join(e.dir, fmt.Sprintf("snapshot-%d", time.Now().UnixNano()))
	require.NoError(e.t, e.nats.Pause())
	err := copyDir(e.nats.StoreDir(), dir)
	require.NoError(e.t, e.nats.Resume())
	require.NoError(e.t, err)
	return dir
}

// rollback kills the server and restarts it on the copy snap: every write
// acknowledged since the copy is lost, and the stream's revisions go back.
func (e *env) rollback(snap string) {
	e.t.Helper()
	e.mark(record.MarkServerKill, "", "rollback")
	require.NoError(e.t, e.nats.Kill())
	require.NoError(e.t, os.RemoveAll(e.nats.StoreDir()))
	require.NoError(e.t, copyDir(snap, e.nats.StoreDir()))
	require.NoError(e.t, e.nats.Start())
	e.mark(record.MarkRollback, "", snap)
	e.mu.Lock()
	e.epoch++
	e.mu.Unlock()
}

func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(target)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}

// The server loses acknowledged writes: its store directory is copied, the
// leader resigns (a new term and token, both to be lost) and renews, then
// the server is killed and restarted on the copy. The running stores saw
// later revisions and stop (a sequence regression); the instances are
// restarted one TTL later, in a new epoch of the store, and may be given
// tokens that were issued before, even to another term: the fence refuses
// their writes (its term check when the token is the same) until a new
// acquisition's token passes the old ones (the new holders hand over every
// 300 ms). Every holder has one owner ID: a fence that judged by owner ID
// would admit a token issued twice.
func TestServerRollback(t *testing.T) {
	e := newEnv(t, "server-rollback")
	e.extra = []string{"-owner", sharedOwner}
	n := rounds(1, 3)
	e.startN(candidates)
	var token uint64
	stopped, holders := 0, 0
	for range n {
		var h *holder
		h, token = e.leader(token)
		time.Sleep(renew + jitter(renew))
		snap := e.snapshot()
		e.resign(h)
		_, token = e.leader(token)
		time.Sleep(2 * renew)
		old := e.running()
		e.rollback(snap)
		stopped += e.awaitStopped(old)
		holders += len(old)
		time.Sleep(e.ttl)
		e.terminate(old)
		e.startN(candidates, "-hold", "300ms")
	}
	e.leader(token)
	h := e.history()
	res := check.Check(h)
	oldTokens := map[uint64]int{} // token -> the epoch that issued it first
	again, sameToken := 0, 0
	for _, t := range res.Tenures {
		if ep, ok := oldTokens[t.Token]; ok && ep != t.Epoch {
			sameToken++
		} else if !ok {
			oldTokens[t.Token] = t.Epoch
		}
	}
	maxBefore := map[int]uint64{}
	for _, t := range res.Tenures {
		for ep := range t.Epoch {
			if t.Token <= maxBefore[ep] {
				again++
				break
			}
		}
		maxBefore[t.Epoch] = max(maxBefore[t.Epoch], t.Token)
	}
	byTerm := 0
	for _, w := range h.Writes {
		if !w.Accepted && w.Token == w.Highest {
			byTerm++
		}
	}
	e.finish("nats-server restarted on a copy of its store taken before a resignation and renewals: acknowledged "+
		"writes lost; all holders with one owner ID", n, fmt.Sprintf("%d of %d stores reported the regression and stopped; %d tenures of a later "+
		"epoch got tokens at or below an earlier epoch's, %d of them a token an earlier term had; %d writes "+
		"refused by the fence's term check", stopped, holders, again, sameToken, byTerm), "release")
}
