package natsstore

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// minIsolationTimeout is the shortest Config.IsolationTimeout.
const minIsolationTimeout = 100 * time.Millisecond

// maxIsolationBackoff caps how many times longer than Config.IsolationTimeout
// the store waits before moving again when JetStream stays unreachable after
// a move (the whole cluster may be down: moving does not help then).
const maxIsolationBackoff = 16

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

// isolation records how JetStream answers the store's requests: the first
// request that went unanswered since the last answer. Times are monotonic,
// in nanoseconds since start plus one (0 means none).
type isolation struct {
	start  time.Time
	failed atomic.Int64
	moves  atomic.Int64 // moves since JetStream last answered
}

func (iso *isolation) now() int64 { return int64(time.Since(iso.start)) + 1 }

// note records the outcome of a request made with ctx, sent at begin.
func (iso *isolation) note(ctx context.Context, begin time.Time, err error) {
	switch {
	case jsAnswered(err):
		iso.failed.Store(0)
		iso.moves.Store(0)
	case errors.Is(err, context.Canceled) && !errors.Is(context.Cause(ctx), errCreateTimeout),
		errors.Is(err, errLinkLost),
		errors.Is(err, nats.ErrConnectionClosed),
		errors.Is(err, nats.ErrConnectionReconnecting),
		errors.Is(err, nats.ErrConnectionDraining),
		errors.Is(err, nats.ErrPermissionViolation):
		// The caller gave up, the connection is down (nats.go reconnects
		// by itself), or a permission is missing: no sign of isolation.
	default:
		iso.failed.CompareAndSwap(0, int64(begin.Sub(iso.start))+1)
	}
}

// unansweredFor returns how long JetStream has not answered, or 0.
func (iso *isolation) unansweredFor() time.Duration {
	f := iso.failed.Load()
	if f == 0 {
		return 0
	}
	return time.Duration(iso.now() - f)
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
	k.iso.note(ctx, begin, err)
	return ack, err
}

func (k notingKV) GetLastMsgForSubject(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	begin := time.Now()
	m, err := k.keyValue.GetLastMsgForSubject(ctx, subject)
	k.iso.note(ctx, begin, err)
	return m, err
}

func (k notingKV) Watch(ctx context.Context, keys string, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	begin := time.Now()
	w, err := k.keyValue.Watch(ctx, keys, opts...)
	k.iso.note(ctx, begin, err)
	return w, err
}

// watchIsolation starts the isolation check when Config.IsolationTimeout
// applies: when the store's requests have gone unanswered for longer than
// the timeout while connected, it asks JetStream directly ($JS.API.INFO,
// which only a server in touch with the cluster's meta leader answers), and
// when that fails too and the connection knows other servers, it reconnects
// to another one. api is the JetStream API prefix, ending with '.'. It costs
// no request while JetStream answers, and one per IsolationTimeout/4 at most
// while it does not.
func (s *Store) watchIsolation(api string) {
	bound := s.cfg.isolationTimeout(s.ownConn)
	if bound <= 0 || s.nc == nil {
		return
	}
	iso := &s.health.isolation
	iso.start = time.Now()
	s.kv = notingKV{keyValue: s.kv, iso: iso}
	s.watches.Add(1)
	go func() {
		defer s.watches.Done()
		tick := time.NewTicker(bound / 4)
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
			silent := iso.unansweredFor()
			if silent == 0 || silent < bound*time.Duration(min(1<<iso.moves.Load(), maxIsolationBackoff)) {
				continue
			}
			ctx, cancel := context.WithTimeout(s.life, bound/2)
			begin := time.Now()
			err := s.probeJetStream(ctx, api)
			iso.note(ctx, begin, err)
			cancel()
			if s.life.Err() != nil || jsAnswered(err) {
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
			ev := ServerIsolated{Bucket: s.bucket, Server: server, Unavailable: max(silent, iso.unansweredFor()),
				Reason: err.Error()}
			s.log.Warn("natsstore: JetStream is unreachable through this server; reconnecting to another",
				"server", server, "for", silent, "err", err)
			s.emit(ev)
			iso.failed.Store(0)
			iso.moves.Add(1)
			if err := s.nc.ForceReconnect(); err != nil {
				s.log.Warn("natsstore: reconnecting to another server failed", "err", err)
			}
		}
	}()
}

// probeJetStream asks for the account's JetStream information: an answer
// shows that the server the connection uses is in touch with the cluster.
func (s *Store) probeJetStream(ctx context.Context, api string) error {
	resp, err := s.nc.RequestWithContext(ctx, api+"INFO", nil)
	if err != nil {
		return err
	}
	var r struct {
		Error *jetstream.APIError `json:"error,omitempty"`
	}
	if json.Unmarshal(resp.Data, &r) == nil && r.Error != nil {
		return r.Error
	}
	return nil // any other answer will do
}
