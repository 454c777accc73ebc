package natsstore_test

import (
	"bytes"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// fixSeq is the sequence the error for a bucket whose revisions did not
// start from the clock tells the operator to purge up to.
var fixSeq = regexp.MustCompile(`nats stream purge KV_(\S+) --seq (\d+) -f`)

// followFix does what the error of a refused bucket says, as an operator
// would with `nats stream purge KV_<bucket> --seq <n> -f`, and returns n.
func followFix(t *testing.T, js jetstream.JetStream, err error) uint64 {
	t.Helper()
	require.ErrorIs(t, err, natsstore.ErrBucketConfig)
	m := fixSeq.FindStringSubmatch(err.Error())
	require.NotNil(t, m, "the error names no fix: %v", err)
	seq, perr := strconv.ParseUint(m[2], 10, 64)
	require.NoError(t, perr)
	stream, serr := js.Stream(ctxT(t), "KV_"+m[1])
	require.NoError(t, serr)
	require.NoError(t, stream.Purge(ctxT(t), jetstream.WithPurgeSequence(seq)))
	return seq
}

// byHand makes a bucket as `nats kv add` does, then moves its revisions
// past the clock as the store's error says: a bucket made by hand the way
// natsstore accepts it.
func byHand(t *testing.T, url string, cfg jetstream.KeyValueConfig) {
	t.Helper()
	_, js := conn(t, url)
	_, err := js.CreateKeyValue(ctxT(t), cfg)
	require.NoError(t, err)
	_, err = natsstore.Dial(openCtx(t), natsstore.DialOptions{URLs: []string{url}},
		natsstore.Config{Bucket: cfg.Bucket, NoCreate: true})
	followFix(t, js, err)
}

// guarantees.md: a key is taken only by a compare-and-swap on every
// revision its judgement rested on, and a renewal is one on the revision
// of the holder's last write. In a bucket whose revisions restart at 1
// after a delete and a re-creation by hand, that revision may be another
// term's acquisition: the holder's renewal then lands on it, and both hold
// token 1. The store refuses every bucket whose revisions did not start
// from the clock, and says how to fix it.
func TestBucketMadeByHandIsRefused(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	_, js := conn(t, srv.ClientURL())
	cfg := jetstream.KeyValueConfig{Bucket: "by_hand", History: 1, Storage: jetstream.FileStorage,
		LimitMarkerTTL: time.Minute}
	_, err := js.CreateKeyValue(ctxT(t), cfg)
	require.NoError(t, err)

	before := uint64(time.Now().UnixMicro())
	holder, err := natsstore.Dial(openCtx(t), natsstore.DialOptions{URLs: []string{srv.ClientURL()}},
		natsstore.Config{Bucket: "by_hand"})
	if err == nil {
		// What the refusal prevents: the holder's renewal at revision 1
		// lands on another term's acquisition at revision 1 in the bucket
		// made again.
		defer holder.Close()
		held := mustAcquire(t, holder, claim("job", "owner-a"))
		require.NoError(t, js.DeleteKeyValue(ctxT(t), "by_hand"))
		recreateByHand(t, js, cfg)
		other := dial(t, srv.ClientURL(), natsstore.Config{Bucket: "by_hand"})
		took := mustAcquire(t, other, claim("job", "owner-b"))
		_, rerr := holder.Renew(ctxT(t), held)
		require.Error(t, rerr, "two owners: the renewal of revision %d landed on owner-b's token %d", held.Revision,
			took.Token)
		t.Fatal("a bucket made by hand was opened")
	}
	require.ErrorIs(t, err, lease.ErrStoreConfig)
	assert.Contains(t, err.Error(), "did not start at a value drawn from the clock")
	seq := followFix(t, js, err)
	assert.GreaterOrEqual(t, seq, before, "the fix moves revisions past the clock")

	s := dial(t, srv.ClientURL(), natsstore.Config{Bucket: "by_hand"})
	l := mustAcquire(t, s, claim("job", "owner-a"))
	assert.GreaterOrEqual(t, l.Revision, seq)
}

// The attack of TestBucketMadeByHandIsRefused on a bucket whose revisions
// started from the clock: deleted and made again by hand while its holder
// is idle, then fixed as the error says, and taken by a new process. The
// holder's renewal and a resume of its term, compare-and-swaps on the old
// bucket's revision, never land.
func TestRenewalNeverLandsInABucketMadeAgainByHand(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	_, js := conn(t, srv.ClientURL())
	holder := dial(t, srv.ClientURL(), natsstore.Config{Bucket: "again"})
	held := mustAcquire(t, holder, claim("job", "owner-a"))

	require.NoError(t, js.DeleteKeyValue(ctxT(t), "again"))
	cfg := jetstream.KeyValueConfig{Bucket: "again", History: 1, Storage: jetstream.FileStorage,
		LimitMarkerTTL: time.Minute}
	recreateByHand(t, js, cfg)
	_, err := natsstore.Dial(openCtx(t), natsstore.DialOptions{URLs: []string{srv.ClientURL()}},
		natsstore.Config{Bucket: "again"})
	followFix(t, js, err)
	other := dial(t, srv.ClientURL(), natsstore.Config{Bucket: "again"})
	took := mustAcquire(t, other, claim("job", "owner-b"))
	require.Greater(t, took.Token, uint64(held.Token), "tokens went back")

	_, err = holder.Renew(ctxT(t), held)
	require.Error(t, err, "the renewal landed on owner-b's acquisition")
	assert.NotErrorIs(t, err, lease.ErrUnavailable, "an answer, not an outage: %v", err)
	e, err := bucket(t, js, "again").Get(ctxT(t), "job")
	require.NoError(t, err)
	assert.Equal(t, took.Revision, e.Revision(), "owner-b's acquisition was written over: %s", e.Value())
}

// The store's log lines name the bucket once (its logger carries it).
func TestLogNamesTheBucketOnce(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	byHand(t, srv.ClientURL(), jetstream.KeyValueConfig{Bucket: "logged", History: 1,
		Storage: jetstream.FileStorage})
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	dial(t, srv.ClientURL(), natsstore.Config{Bucket: "logged", Logger: log})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	warned := 0
	for _, l := range lines {
		assert.LessOrEqual(t, strings.Count(l, "bucket=logged"), 1, "the bucket twice: %s", l)
		if strings.Contains(l, "level=WARN") {
			warned++
		}
	}
	assert.GreaterOrEqual(t, warned, 2, "the fallback and the missing maximum TTL are warned about:\n%s", buf.String())
}

// syncBuffer is a bytes.Buffer safe for the store's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
