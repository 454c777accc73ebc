package natsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	// minIsolationTimeout is the shortest Config.IsolationTimeout.
	minIsolationTimeout = 100 * time.Millisecond
	// maxIsolationBackoff caps how many times longer than usual the store
	// waits before moving again when JetStream stays unreachable after a
	// move (the whole cluster may be down: moving does not help then).
	maxIsolationBackoff = 16
	// isolationProbeShare is the part of Config.IsolationTimeout that the
	// store's requests must have been failing (times the backoff) before
	// the check probes, and the period of its checks.
	isolationProbeShare = 4
	// replicaSilence is how long a stream leader must not have heard from
	// a replica before the probe counts the replica as cut off: the leader
	// hears from its replicas about every second.
	replicaSilence = 3 * time.Second
)

// isolationTimeout resolves Config.IsolationTimeout for a store that owns
// its connection (Dial) or not; 0 means off.
func (c Config) isolationTimeout(ownConn bool) time.Duration {
	switch {
	case c.IsolationTimeout < 0:
		return 0
	case c.IsolationTimeout > 0:
		return c.IsolationTimeout
	case ownConn:
		return DefaultIsolationTimeout
	default:
		return 0
	}
}

// isolation records how JetStream answers the store's requests. Times are
// monotonic, in nanoseconds since start plus one (0 means none).
type isolation struct {
	start    time.Time
	failed   atomic.Int64 // when the first request that failed since the last success was sent
	moves    atomic.Int64 // moves since the last success, or since a move that led to a working server
	moved    atomic.Int64 // when the store last moved
	answered atomic.Int64 // when the last request that JetStream answered was sent
}

func (iso *isolation) now() int64 { return int64(time.Since(iso.start)) + 1 }

func (iso *isolation) at(t time.Time) int64 { return int64(t.Sub(iso.start)) + 1 }

// note records the outcome of a request made with ctx, sent at begin.
//
// A request that went unanswered, or was refused because JetStream is
// unavailable (code 503), fails; so does a write refused as a conflict:
// usually another writer was first, but a server cut off from its cluster
// while it led the bucket's stream refuses every write so, and answers
// reads from what it has, until it steps down. Only what the cluster had to
// agree on (commits: a write acknowledged, a consumer created) ends a
// failure; the probe of watchIsolation decides the rest.
func (iso *isolation) note(ctx context.Context, begin time.Time, err error, commits bool) {
	switch {
	case err == nil && commits:
		iso.healthy()
	case err != nil && isConflict(err):
		iso.fail(begin)
	case jsAnswered(err):
		// An answer, but no proof that the cluster is there: it only
		// shows that a move led to a server that answers (settle).
		iso.answered.Store(iso.at(begin))
	case errors.Is(err, context.Canceled) && !errors.Is(context.Cause(ctx), errCreateTimeout),
		errors.Is(err, errLinkLost),
		errors.Is(err, nats.ErrConnectionClosed),
		errors.Is(err, nats.ErrConnectionReconnecting),
		errors.Is(err, nats.ErrConnectionDraining),
		errors.Is(err, nats.ErrPermissionViolation):
		// The caller gave up, the connection is down (nats.go reconnects
		// by itself), or a permission is missing: no sign of isolation.
	default:
		iso.fail(begin)
	}
}

func (iso *isolation) fail(begin time.Time) {
	iso.failed.CompareAndSwap(0, iso.at(begin))
}

// healthy ends a failure.
func (iso *isolation) healthy() {
	iso.failed.Store(0)
	iso.moves.Store(0)
}

// unansweredFor returns how long the store's requests have been failing,
// or 0.
func (iso *isolation) unansweredFor() time.Duration {
	f := iso.failed.Load()
	if f == 0 {
		return 0
	}
	return time.Duration(iso.now() - f)
}

// backoff is how many times longer than usual the store waits before it
// moves, after moves that did not lead to a working server.
func (iso *isolation) backoff() time.Duration {
	return time.Duration(min(int64(1)<<min(iso.moves.Load(), 4), maxIsolationBackoff))
}

// probeDue returns how long the store's requests have been failing, and
// whether that is long enough to probe: bound/isolationProbeShare times
// the backoff.
func (iso *isolation) probeDue(bound time.Duration) (time.Duration, bool) {
	silent := iso.unansweredFor()
	return silent, silent > 0 && silent >= bound/isolationProbeShare*iso.backoff()
}

// movesOn reports whether the store moves to another server after its
// requests have been failing for silent and the probe found err (not nil).
// A probe answered by a stream leader cut off from its replicas shows that
// this server reaches only the minority side of a partition: the store
// moves at once. No answer or no leader shows no more than that the
// stream is out of reach: the whole stream may be electing a leader, and
// moving may land on a server cut off from the cluster, so the store
// moves only once its requests have been failing for bound times the
// backoff.
func (iso *isolation) movesOn(bound, silent time.Duration, err error) bool {
	var cut *cutOffLeader
	return errors.As(err, &cut) || silent >= bound*iso.backoff()
}

// moving records a move.
func (iso *isolation) moving() {
	iso.failed.Store(0)
	iso.moves.Add(1)
	iso.moved.Store(iso.now())
}

// settle ends the backoff once a move has led to a server that answers:
// a request sent after the move was answered, none failed since, and
// bound has passed. A store that only reads never commits, and would
// otherwise keep the backoff of an old move for its next failure.
func (iso *isolation) settle(bound time.Duration) {
	moved := iso.moved.Load()
	if iso.moves.Load() > 0 && iso.failed.Load() == 0 && iso.answered.Load() > moved &&
		iso.now()-moved >= int64(bound) {
		iso.moves.Store(0)
	}
}

// jsAnswered reports whether err (nil included) is an answer of JetStream,
// as opposed to a request that went unanswered or was refused because
// JetStream is unavailable (code 503) on this server.
func jsAnswered(err error) bool {
	if err == nil || errors.Is(err, jetstream.ErrMsgNotFound) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.Code != http.StatusServiceUnavailable
	}
	var legacy *nats.APIError // a watch's creation goes through nats.go's older API
	if errors.As(err, &legacy) {
		return legacy.Code != http.StatusServiceUnavailable
	}
	return false
}

// notingKV is a keyValue that records in iso how JetStream answers.
type notingKV struct {
	keyValue
	iso *isolation
}

func (k notingKV) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	begin := time.Now()
	ack, err := k.keyValue.PublishMsg(ctx, m, opts...)
	k.iso.note(ctx, begin, err, true)
	return ack, err
}

func (k notingKV) GetLastMsgForSubject(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	begin := time.Now()
	m, err := k.keyValue.GetLastMsgForSubject(ctx, subject)
	k.iso.note(ctx, begin, err, false)
	return m, err
}

func (k notingKV) Watch(ctx context.Context, filter string) (jetstream.KeyWatcher, error) {
	begin := time.Now()
	w, err := k.keyValue.Watch(ctx, filter)
	k.iso.note(ctx, begin, err, true)
	return w, err
}

// watchIsolation starts the isolation check when Config.IsolationTimeout
// (bound) applies. When the store's requests have been failing for
// bound/4 while connected, it asks for the bucket's stream information
// (probeStream), and again every bound/4 while they fail. When that shows
// the stream out of reach through this server and the connection knows
// other servers, it reconnects to another one: at once when the answer
// comes from a stream leader cut off from its replicas, once the requests
// have been failing for bound otherwise (movesOn), each time longer after
// moves that did not help (backoff, settle). api is the JetStream API
// prefix, ending with '.'. It costs no request while the store's requests
// succeed, and one per bound/4 at most while they fail.
func (s *Store) watchIsolation(api string) {
	bound := s.cfg.isolationTimeout(s.ownConn)
	if bound <= 0 || s.nc == nil {
		return
	}
	iso := &s.health.isolation
	iso.start = time.Now()
	s.kv = notingKV{keyValue: s.kv, iso: iso}
	subject := api + "STREAM.INFO.KV_" + s.bucket
	s.watches.Add(1)
	go func() {
		defer s.watches.Done()
		tick := time.NewTicker(bound / isolationProbeShare)
		defer tick.Stop()
		alone := false // logged that no other server is known
		for {
			select {
			case <-s.life.Done():
				return
			case <-tick.C:
			}
			if s.nc.Status() != nats.CONNECTED {
				iso.failed.Store(0) // nats.go reconnects; judge the next server afresh
				continue
			}
			iso.settle(bound)
			silent, due := iso.probeDue(bound)
			if !due {
				continue
			}
			ctx, cancel := context.WithTimeout(s.life, bound/2)
			err := s.probeStream(ctx, subject, replicaSilence)
			cancel()
			if s.life.Err() != nil {
				continue
			}
			if err == nil {
				// The stream answers through this server: its requests
				// failed for another reason (lost races to other writers,
				// or reads refused with 503 while the cluster elects its
				// JetStream meta leader, as every server without one
				// refuses them: moving would not help).
				iso.healthy()
				continue
			}
			if !iso.movesOn(bound, silent, err) {
				continue
			}
			server := s.nc.ConnectedUrlRedacted()
			if len(s.nc.Servers()) < 2 {
				if !alone {
					alone = true
					s.log.Warn("natsstore: JetStream is unreachable through the only server this connection knows",
						"server", server, "for", silent, "err", err)
				}
				continue
			}
			alone = false
			ev := ServerIsolated{Bucket: s.bucket, Server: server, Unavailable: silent, Reason: err.Error()}
			s.log.Warn("natsstore: JetStream is unreachable through this server; reconnecting to another",
				"server", server, "for", silent, "err", err)
			s.emit(ev)
			iso.moving()
			if err := s.nc.ForceReconnect(); err != nil {
				s.log.Warn("natsstore: reconnecting to another server failed", "err", err)
			}
		}
	}()
}

// probeStream asks for the bucket's stream information, which the stream
// leader answers. It returns nil when the answer shows a stream that can
// commit: one with a leader that has heard from a majority of its replicas
// within silence. No answer, no leader, or an answer from a leader cut off
// from its replicas (it goes on answering until it steps down: a
// *cutOffLeader) is an error.
func (s *Store) probeStream(ctx context.Context, subject string, silence time.Duration) error {
	resp, err := s.nc.RequestWithContext(ctx, subject, nil)
	if err != nil {
		return err
	}
	var r struct {
		Error   *jetstream.APIError    `json:"error,omitempty"`
		Cluster *jetstream.ClusterInfo `json:"cluster,omitempty"`
	}
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return nil // an answer all the same
	}
	switch {
	case r.Error != nil && r.Error.Code == http.StatusServiceUnavailable:
		return r.Error
	case r.Error != nil || r.Cluster == nil:
		return nil // answered: the bucket is gone, or JetStream is not clustered
	case r.Cluster.Leader == "":
		return errors.New("the bucket's stream has no leader that this server can reach")
	}
	heard := 1 // the leader
	for _, p := range r.Cluster.Replicas {
		if p != nil && !p.Offline && p.Active < silence {
			heard++
		}
	}
	if quorum := (len(r.Cluster.Replicas)+1)/2 + 1; heard < quorum {
		return &cutOffLeader{leader: r.Cluster.Leader, silence: silence}
	}
	return nil
}

// cutOffLeader is a probe's answer from a stream leader that has not heard
// from a majority of its replicas: one cut off from its cluster, and the
// only leader the store's server reaches.
type cutOffLeader struct {
	leader  string
	silence time.Duration
}

func (e *cutOffLeader) Error() string {
	return fmt.Sprintf("the bucket's stream leader %s has not heard from a majority of its replicas for %v",
		e.leader, e.silence)
}
