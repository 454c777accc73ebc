package natsstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/asterforge/aster/lease"
)

// Metadata the store records in a bucket it creates (nats-server 2.10 and
// later keep stream metadata; older servers drop it).
const (
	// metaMaxTTL is the bucket's maximum lease TTL, as a Go duration.
	metaMaxTTL = "aster.max_ttl"
	// metaDomain is the JetStream domain the bucket was created in, for
	// operators.
	metaDomain = "aster.domain"
)

// minEpoch is the smallest first revision that counts as drawn from the
// clock: 2020-01-01 in microseconds since 1970. A bucket the store creates
// starts at the current time in microseconds (see epoch).
const minEpoch = 1_577_836_800_000_000

// epoch returns the first revision of a bucket created at now: microseconds
// since 1970. A bucket created later starts above every revision an earlier
// bucket of the same name issued, as long as that bucket took fewer than one
// write per microsecond on average (a stream takes far fewer: every write
// goes through its leader, at tens of microseconds each) and the creators'
// clocks differ by less than the slack that leaves (see docs/guarantees.md).
func epoch(now time.Time) uint64 {
	if us := now.UnixMicro(); us > 0 {
		return uint64(us)
	}
	return 1
}

// bucketFacts is what a store reads about its bucket and the server.
type bucketFacts struct {
	apiLevel int    // JetStream API level: 1 or more since nats-server 2.11
	domain   string // the JetStream domain of the server that answered
	// noMetadata: the connected server predates stream metadata (2.10) and
	// drops it from the configuration it reports.
	noMetadata bool
	cfg        jetstream.StreamConfig
	created    time.Time // the stream's creation time: a new one means re-created
	state      jetstream.StreamState
	lastSeq    uint64
}

// unreadable says why the stream's state is impossible, or returns "": a
// server that misreads storage written by a newer one (nats-server 2.9
// reading 2.10 or later, which write tombstones it does not know) reports
// such states, and finds keys empty that are held.
func (f bucketFacts) unreadable() string {
	st := f.state
	if st.FirstSeq > st.LastSeq+1 || st.Msgs > 0 && (st.FirstSeq > st.LastSeq || st.Msgs > st.LastSeq-st.FirstSeq+1) {
		return fmt.Sprintf("the server reports an impossible state of its stream (first revision %d, last %d, %d "+
			"messages): it cannot read the bucket's storage, which a newer nats-server probably wrote "+
			"(nats-server does not support downgrades); keys would look empty while they are held", st.FirstSeq,
			st.LastSeq, st.Msgs)
	}
	return ""
}

// clockRevisions reports whether the bucket's revisions started at a value
// drawn from the clock (see epoch), by its configuration or by a purge that
// moved them there (see createBucket): only then does a bucket made again
// under the same name never reuse a revision of the old one, on which a
// renewal or a resume, a compare-and-swap on a revision, could land.
func (f bucketFacts) clockRevisions() bool {
	return f.cfg.FirstSeq >= minEpoch || f.state.FirstSeq >= minEpoch || f.state.LastSeq >= minEpoch
}

// readFacts reads the account's JetStream information and the bucket's
// stream. A missing stream gives an error matching
// jetstream.ErrStreamNotFound, with the account's facts filled in.
func readFacts(ctx context.Context, js jetstream.JetStream, name string) (bucketFacts, error) {
	var f bucketFacts
	info, err := js.AccountInfo(ctx)
	if err != nil {
		if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
			return f, fmt.Errorf("natsstore: JetStream is not enabled for this account on the server: %w", err)
		}
		return f, fmt.Errorf("natsstore: read JetStream account info: %w", err)
	}
	f.apiLevel, f.domain = info.API.Level, info.Domain
	f.noMetadata = versionBefore(js.Conn().ConnectedServerVersion(), 2, 10)
	return f, readStream(ctx, js, name, &f)
}

// readStream reads the bucket's stream into f: a request its leader
// answers, which needs no meta leader (the account's information does).
func readStream(ctx context.Context, js jetstream.JetStream, name string, f *bucketFacts) error {
	stream, err := js.Stream(ctx, "KV_"+name)
	if err != nil {
		return err
	}
	si := stream.CachedInfo()
	f.cfg, f.created, f.state, f.lastSeq = si.Config, si.Created, si.State, si.State.LastSeq
	return nil
}

// bucketState is what opening a bucket decided.
type bucketState struct {
	mode        ExpiryMode // ExpiryServer or ExpiryObserved
	markerTTL   int64      // seconds; the TTL of release markers in server mode
	kv          jetstream.KeyValue
	replicas    int
	facts       bucketFacts
	created     bool          // this store created the bucket
	maxTTL      time.Duration // the bucket's maximum lease TTL
	maxRecorded bool          // the bucket records maxTTL
	claimMax    time.Duration // the longest TTL this store accepts
	fallback    string        // why the store judges expiry by observation, if not configured to
	degraded    []string      // what guarantees are weaker with this bucket, and how to fix it
}

// openBucket binds to the bucket, creating it when it is missing (unless
// cfg.NoCreate), and checks its configuration. It never changes an existing
// bucket.
func openBucket(ctx context.Context, js jetstream.JetStream, cfg Config, log *slog.Logger) (bucketState, error) {
	var st bucketState
	name := cfg.bucket()
	// 1. Bind to the bucket, creating it when it is missing.
	f, created, err := bindBucket(ctx, js, cfg)
	st.created = created
	if err != nil {
		return st, err
	}
	st.facts = f
	// 2. Check that it can keep leases.
	if err := checkBucket(name, f); err != nil {
		return st, err
	}
	st.replicas = f.cfg.Replicas
	if cfg.Replicas != 0 && cfg.Replicas != st.replicas {
		log.Warn("natsstore: existing bucket has another replica count than configured; it is used as it is",
			"bucket", name, "replicas", st.replicas, "configured", cfg.Replicas)
	}
	// 3. Decide the longest lease TTL, and how expiry is judged.
	if err := st.limitTTL(name, cfg); err != nil {
		return st, err
	}
	if err := st.chooseExpiry(cfg); err != nil {
		return st, err
	}
	// 4. Check that fencing tokens never go back, should the bucket be
	// made again.
	if !f.clockRevisions() {
		return st, fmt.Errorf("%w: %w: bucket %q: its revisions did not start at a value drawn from the clock (it was "+
			"made by hand, or by a version before natsstore did so): made again after a delete, it would restart them at 1, "+
			"where a renewal of a lease of the old bucket can land on another owner's value and fencing tokens go "+
			"back; delete it and let natsstore create it (Dial without Config.NoCreate, or CreateBucket), or, while "+
			"it holds no lease (a purge deletes every key), move its revisions on: nats stream purge KV_%s --seq %d -f",
			ErrBucketConfig, lease.ErrStoreConfig, name, name, epoch(time.Now()))
	}
	// 5. Take the release markers' TTL, and the bucket's handle.
	st.markerTTL = int64(cfg.markerTTL().Seconds())
	if f.cfg.SubjectDeleteMarkerTTL > 0 {
		st.markerTTL = int64(roundUpSecond(f.cfg.SubjectDeleteMarkerTTL).Seconds())
	}
	if st.kv, err = js.KeyValue(ctx, name); err != nil {
		return st, fmt.Errorf("natsstore: bind bucket %q: %w", name, err)
	}
	return st, nil
}

// bindBucket reads the facts of cfg's bucket, creating it first when it is
// missing (unless cfg.NoCreate); created tells whether this store created
// it.
func bindBucket(ctx context.Context, js jetstream.JetStream, cfg Config) (f bucketFacts, created bool, err error) {
	name := cfg.bucket()
	f, err = readFacts(ctx, js, name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound) && cfg.NoCreate:
		return f, false, fmt.Errorf("%w: %w: %q (Config.NoCreate is set; is the account, the JetStream domain or the "+
			"bucket name wrong?)", ErrNoBucket, lease.ErrStoreConfig, name)
	case errors.Is(err, jetstream.ErrStreamNotFound):
		err = createBucket(ctx, js, cfg, f)
		if err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return f, false, fmt.Errorf("natsstore: create bucket %q: %w", name, err)
		}
		created = err == nil
		// Created, by us or by a contender at the same moment: bind to it
		// and check it like any existing bucket.
		if f, err = readFacts(ctx, js, name); err != nil {
			return f, created, fmt.Errorf("natsstore: bind bucket %q: %w", name, err)
		}
	case err != nil:
		return f, false, fmt.Errorf("natsstore: bind bucket %q: %w", name, err)
	}
	return f, created, nil
}

// checkBucket reports a bucket whose stream the server cannot read, or
// whose configuration cannot keep leases.
func checkBucket(name string, f bucketFacts) error {
	if why := f.unreadable(); why != "" {
		return fmt.Errorf("%w: %w: bucket %q: %s; run the server version that wrote it", ErrBucketConfig,
			lease.ErrStoreConfig, name, why)
	}
	if problems := bucketProblems(f.cfg); len(problems) > 0 {
		return fmt.Errorf("%w: %w: bucket %q: %s; recreate it (natsstore creates a correct one when it is "+
			"missing, see CreateBucket) or use another bucket", ErrBucketConfig, lease.ErrStoreConfig, name,
			joinProblems(problems))
	}
	return nil
}

// limitTTL decides the bucket's maximum lease TTL, the one it records or
// else cfg's, and the longest TTL this store accepts.
func (st *bucketState) limitTTL(name string, cfg Config) error {
	maxTTL, recorded, err := recordedMaxTTL(name, st.facts.cfg)
	switch {
	case err != nil:
		return err
	case !recorded:
		st.maxTTL = cfg.maxTTL()
		st.degraded = append(st.degraded, fmt.Sprintf("the bucket records no maximum lease TTL (stream metadata %s); "+
			"assuming Config.MaxTTL, %v: every instance that uses the bucket must set the same (a contender waits "+
			"that long for a key deleted or purged by hand, and refuses longer TTLs); a bucket natsstore creates on "+
			"nats-server 2.10 or later records it", metaMaxTTL, st.maxTTL))
	case cfg.MaxTTL > 0 && roundUpSecond(cfg.MaxTTL) > maxTTL:
		return fmt.Errorf("%w: %w: bucket %q allows lease TTLs up to %v (metadata %s), less than Config.MaxTTL %v: "+
			"lower Config.MaxTTL, or create a new bucket with the larger maximum", ErrBucketConfig, lease.ErrStoreConfig,
			name, maxTTL, metaMaxTTL, cfg.MaxTTL)
	default:
		st.maxTTL, st.maxRecorded = maxTTL, true
	}
	st.claimMax = st.maxTTL
	if cfg.MaxTTL > 0 {
		st.claimMax = min(st.claimMax, roundUpSecond(cfg.MaxTTL))
	}
	return nil
}

// chooseExpiry decides how the store judges expiry: by the server's
// per-message TTLs when it and the bucket have them, unless cfg says
// otherwise.
func (st *bucketState) chooseExpiry(cfg Config) error {
	switch why := ttlMissing(st.facts); {
	case cfg.Expiry == ExpiryObserved:
		st.mode = ExpiryObserved
	case why == "":
		st.mode = ExpiryServer
	case cfg.Expiry == ExpiryServer:
		return fmt.Errorf("%w: %w: %s, and Config.Expiry is ExpiryServer; recreate the bucket with "+
			"LimitMarkerTTL on nats-server 2.11 or later, or use ExpiryAuto", ErrBucketConfig, lease.ErrStoreConfig, why)
	default:
		st.mode, st.fallback = ExpiryObserved, why
	}
	return nil
}

// ttlMissing says why the server or the bucket cannot expire per-message
// TTLs, or returns "" when they can.
func ttlMissing(f bucketFacts) string {
	switch {
	case f.apiLevel < 1:
		// API level 1 came with nats-server 2.11 and per-message TTLs.
		return fmt.Sprintf("the server (JetStream API level %d) predates per-message TTLs (nats-server 2.11)", f.apiLevel)
	case !f.cfg.AllowMsgTTL || f.cfg.SubjectDeleteMarkerTTL <= 0:
		return fmt.Sprintf("bucket %q has no LimitMarkerTTL (per-message TTLs are not enabled)",
			strings.TrimPrefix(f.cfg.Name, "KV_"))
	}
	return ""
}

// recordedMaxTTL returns the maximum lease TTL the bucket records, and
// whether it records one.
func recordedMaxTTL(name string, sc jetstream.StreamConfig) (time.Duration, bool, error) {
	v, ok := sc.Metadata[metaMaxTTL]
	if !ok {
		return 0, false, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < minTTL {
		return 0, true, fmt.Errorf("%w: %w: bucket %q: its metadata %s is %q, not a duration of at least %v: "+
			"set it to the longest lease TTL in use (nats stream edit KV_%s --metadata %s=2m0s)", ErrBucketConfig,
			lease.ErrStoreConfig, name, metaMaxTTL, v, minTTL, name, metaMaxTTL)
	}
	return roundUpSecond(d), true, nil
}

// CreateBucket creates the bucket cfg describes, as Dial and New create a
// missing one, from an administrator's tool, so that services can run with
// Config.NoCreate and without permission to create streams. It fails with an
// error matching jetstream.ErrStreamNameAlreadyInUse when the bucket exists,
// and never changes one. See docs/nats.md, "Creating the bucket in
// production".
func CreateBucket(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	if js == nil {
		return &lease.FieldError{Field: "js", Reason: "must not be nil"}
	}
	if err := cfg.validate(); err != nil {
		return err
	}
	info, err := js.AccountInfo(ctx)
	if err != nil {
		return fmt.Errorf("natsstore: read JetStream account info: %w", err)
	}
	return createBucket(ctx, js, cfg, bucketFacts{apiLevel: info.API.Level, domain: info.Domain})
}

// createBucket creates cfg's bucket on the server f describes.
func createBucket(ctx context.Context, js jetstream.JetStream, cfg Config, f bucketFacts) error {
	name := cfg.bucket()
	sc := jetstream.StreamConfig{
		Name:              "KV_" + name,
		Description:       "Aster leases",
		Subjects:          []string{"$KV." + name + ".>"},
		MaxMsgsPerSubject: 1,
		MaxMsgs:           -1,
		MaxBytes:          -1,
		MaxMsgSize:        -1,
		MaxConsumers:      -1,
		Storage:           jetstream.FileStorage,
		Replicas:          cfg.replicas(),
		Discard:           jetstream.DiscardNew,
		Duplicates:        2 * time.Minute,
		AllowRollup:       true,
		DenyDelete:        true,
		AllowDirect:       true,
		FirstSeq:          epoch(time.Now()),
		Metadata:          map[string]string{metaMaxTTL: cfg.maxTTL().String()},
	}
	if cfg.MaxBytes > 0 {
		sc.MaxBytes = cfg.MaxBytes
	}
	if f.domain != "" {
		sc.Metadata[metaDomain] = f.domain
	}
	if f.apiLevel >= 1 && cfg.Expiry != ExpiryObserved {
		sc.AllowMsgTTL = true
		sc.SubjectDeleteMarkerTTL = cfg.markerTTL()
	}
	for wait := 10 * time.Millisecond; ; wait *= 2 {
		stream, err := js.CreateStream(ctx, sc)
		if err == nil {
			return startPastClock(ctx, stream, sc.FirstSeq)
		}
		if !storeFailed(err) || wait > time.Second {
			return err
		}
		// The server is still removing the files of a stream of this name
		// deleted a moment ago (`nats kv rm` just before a Dial): it
		// refuses the creation with a 500 for a few milliseconds.
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// startPastClock moves the revisions of a stream just created, and still
// empty, to first when the server ignored the stream's first sequence
// (nats-server before 2.10): a purge up to a sequence beyond the last one
// starts the stream there. Until then every store refuses the bucket
// (clockRevisions), so no lease is written before it.
func startPastClock(ctx context.Context, stream jetstream.Stream, first uint64) error {
	if stream.CachedInfo().State.FirstSeq >= minEpoch {
		return nil
	}
	if err := stream.Purge(ctx, jetstream.WithPurgeSequence(first)); err != nil {
		return fmt.Errorf("natsstore: move the new bucket's revisions to %d (the server ignored its first sequence): %w",
			first, err)
	}
	return nil
}

// storeFailed reports whether err is the server's "error creating store for
// stream", which it answers while a deleted stream's files are being removed.
func storeFailed(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrStreamStoreFailed
}

// bucketProblems lists what makes a stream configuration unsafe for leases;
// each problem says what goes wrong.
func bucketProblems(sc jetstream.StreamConfig) []string {
	var problems []string
	if sc.MaxMsgsPerSubject != 1 {
		problems = append(problems, fmt.Sprintf("History is %d, not 1: older revisions outlive a release, "+
			"and the server raises per-key TTLs to LimitMarkerTTL", sc.MaxMsgsPerSubject))
	}
	if sc.MaxAge > 0 {
		problems = append(problems, fmt.Sprintf("the bucket has a TTL (MaxAge %v): it removes every key that long after "+
			"its last write, whatever the lease's own TTL, with a marker that looks like an expiry; leases carry their own "+
			"TTL, the bucket must have none", sc.MaxAge))
	}
	if sc.Storage == jetstream.MemoryStorage {
		problems = append(problems, "memory storage: a server restart loses every lease and restarts revisions, "+
			"so fencing tokens would go backwards; use file storage")
	}
	if sc.Discard == jetstream.DiscardOld && (sc.MaxMsgs > 0 || sc.MaxBytes > 0) {
		problems = append(problems, "discard policy old with a size limit: the server would silently drop held leases "+
			"when the bucket is full")
	}
	if sc.MaxMsgSize > 0 && sc.MaxMsgSize < maxRecordLen {
		problems = append(problems, fmt.Sprintf("MaxValueSize %d is smaller than a lease value (up to %d bytes)",
			sc.MaxMsgSize, maxRecordLen))
	}
	if sc.Mirror != nil {
		problems = append(problems, "the bucket is a mirror, which cannot be written")
	}
	if sc.Sealed {
		problems = append(problems, "the bucket is sealed, which cannot be written")
	}
	return problems
}

func joinProblems(problems []string) string { return strings.Join(problems, "; ") }

// versionBefore reports whether v, a server version such as "2.9.10", is
// before major.minor; it reports false for a version it cannot read.
func versionBefore(v string, major, minor int) bool {
	var maj, mnr int
	if _, err := fmt.Sscanf(v, "%d.%d", &maj, &mnr); err != nil {
		return false
	}
	return maj < major || maj == major && mnr < minor
}
