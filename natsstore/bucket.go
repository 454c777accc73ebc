package natsstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// bucketState is what opening a bucket decided.
type bucketState struct {
	mode      ExpiryMode // ExpiryServer or ExpiryObserved
	markerTTL int64      // seconds; the TTL of release markers in server mode
	kv        jetstream.KeyValue
	replicas  int
}

// openBucket binds to the bucket, creating it when it is missing (unless
// cfg.NoCreate), and checks its configuration. It never changes an existing
// bucket.
func openBucket(ctx context.Context, js jetstream.JetStream, cfg Config, log *slog.Logger) (bucketState, error) {
	var st bucketState
	info, err := js.AccountInfo(ctx)
	if err != nil {
		if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
			return st, fmt.Errorf("natsstore: JetStream is not enabled for this account on the server: %w", err)
		}
		return st, fmt.Errorf("natsstore: read JetStream account info: %w", err)
	}
	// API level 1 came with nats-server 2.11 and per-message TTLs.
	serverTTL := info.API.Level >= 1

	name := cfg.bucket()
	stream, err := js.Stream(ctx, "KV_"+name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound) && cfg.NoCreate:
		return st, fmt.Errorf("%w: %q (Config.NoCreate is set)", ErrNoBucket, name)
	case errors.Is(err, jetstream.ErrStreamNotFound):
		kcfg := jetstream.KeyValueConfig{
			Bucket:      name,
			Description: "Aster leases",
			History:     1,
			Storage:     jetstream.FileStorage,
			Replicas:    cfg.replicas(),
			MaxBytes:    cfg.MaxBytes,
		}
		if serverTTL && cfg.Expiry != ExpiryObserved {
			kcfg.LimitMarkerTTL = cfg.markerTTL()
		}
		_, err = js.CreateKeyValue(ctx, kcfg)
		if err != nil && !errors.Is(err, jetstream.ErrBucketExists) && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return st, fmt.Errorf("natsstore: create bucket %q: %w", name, err)
		}
		if err == nil {
			log.Info("natsstore: created bucket", "bucket", name, "replicas", kcfg.Replicas,
				"limit_marker_ttl", kcfg.LimitMarkerTTL)
		}
		// Created, by us or by a contender at the same moment: bind to it
		// and check it like any existing bucket.
		if stream, err = js.Stream(ctx, "KV_"+name); err != nil {
			return st, fmt.Errorf("natsstore: bind bucket %q: %w", name, err)
		}
	case err != nil:
		return st, fmt.Errorf("natsstore: bind bucket %q: %w", name, err)
	}

	sc := stream.CachedInfo().Config
	if err := checkBucket(name, sc); err != nil {
		return st, err
	}
	st.replicas = sc.Replicas
	if cfg.Replicas != 0 && cfg.Replicas != sc.Replicas {
		log.Warn("natsstore: existing bucket has another replica count than configured; it is used as it is",
			"bucket", name, "replicas", sc.Replicas, "configured", cfg.Replicas)
	}

	ttlReady := serverTTL && sc.AllowMsgTTL && sc.SubjectDeleteMarkerTTL > 0
	switch {
	case cfg.Expiry == ExpiryObserved:
		st.mode = ExpiryObserved
	case ttlReady:
		st.mode = ExpiryServer
	default:
		why := fmt.Sprintf("bucket %q has no LimitMarkerTTL (per-message TTLs are not enabled)", name)
		if !serverTTL {
			why = fmt.Sprintf("the server (JetStream API level %d) predates per-message TTLs (nats-server 2.11)", info.API.Level)
		}
		if cfg.Expiry == ExpiryServer {
			return st, fmt.Errorf("%w: %s, and Config.Expiry is ExpiryServer; "+
				"recreate the bucket with LimitMarkerTTL on nats-server 2.11 or later, or use ExpiryAuto", ErrBucketConfig, why)
		}
		st.mode = ExpiryObserved
		log.Warn("natsstore: "+why+"; expiry is judged by contenders watching for an unchanged revision "+
			"for a lease's TTL, and watchers do not see expiries", "bucket", name)
	}
	st.markerTTL = int64(cfg.markerTTL().Seconds())
	if sc.SubjectDeleteMarkerTTL > 0 {
		st.markerTTL = int64(roundUpSecond(sc.SubjectDeleteMarkerTTL).Seconds())
	}
	if st.kv, err = js.KeyValue(ctx, name); err != nil {
		return st, fmt.Errorf("natsstore: bind bucket %q: %w", name, err)
	}
	return st, nil
}

// checkBucket refuses stream configurations under which leases are unsafe.
// Each reason says what goes wrong and how to fix it.
func checkBucket(name string, sc jetstream.StreamConfig) error {
	var problems []string
	if sc.MaxMsgsPerSubject != 1 {
		problems = append(problems, fmt.Sprintf("History is %d, not 1: older revisions outlive a release, "+
			"and the server raises per-key TTLs to LimitMarkerTTL", sc.MaxMsgsPerSubject))
	}
	if sc.MaxAge > 0 {
		problems = append(problems, fmt.Sprintf("the bucket has a TTL (%v): it removes every key that long after "+
			"its last write, whatever the lease's own TTL; leases carry their own TTL, the bucket must have none", sc.MaxAge))
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
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: bucket %q: %s; recreate it (natsstore creates a correct one when it is missing) "+
		"or use another bucket", ErrBucketConfig, name, strings.Join(problems, "; "))
}
