package natsstore

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
)

// The isolation check applies by default only to a connection the store
// made; a caller's connection opts in with a positive IsolationTimeout.
func TestWatchAndIsolationDefaults(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cfg       Config
		ownConn   bool
		check     time.Duration
		isolation time.Duration
	}{
		{"Dial", Config{}, true, DefaultWatchCheckInterval, DefaultIsolationTimeout},
		{"NewConn", Config{}, false, DefaultWatchCheckInterval, 0},
		{"NewConn opts in", Config{IsolationTimeout: 3 * time.Second}, false, DefaultWatchCheckInterval, 3 * time.Second},
		{"set", Config{WatchCheckInterval: time.Second, IsolationTimeout: 5 * time.Second}, true, time.Second, 5 * time.Second},
		{"disabled", Config{WatchCheckInterval: -1, IsolationTimeout: -1}, true, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, tc.cfg.validate())
			assert.Equal(t, tc.check, tc.cfg.watchCheck())
			assert.Equal(t, tc.isolation, tc.cfg.isolationTimeout(tc.ownConn))
		})
	}
	for _, cfg := range []Config{{WatchCheckInterval: time.Millisecond}, {IsolationTimeout: time.Millisecond}} {
		require.ErrorIs(t, cfg.validate(), lease.ErrInvalid, "%+v", cfg)
	}
}

// A request JetStream did not answer, answered that it is unavailable, or
// refused as a conflict counts towards isolation; only a write or a
// consumer the cluster agreed on ends it.
func TestIsolationNotes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		ctx    func() context.Context
		failed bool
	}{
		{"answered", nil, nil, false},
		{"not found", jetstream.ErrMsgNotFound, nil, false},
		{"conflict", &jetstream.APIError{Code: http.StatusBadRequest, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence}, nil, true},
		{"other answer", &jetstream.APIError{Code: http.StatusBadRequest, ErrorCode: jetstream.JSErrCodeStreamNotFound}, nil, false},
		{"unavailable", &jetstream.APIError{Code: http.StatusServiceUnavailable, ErrorCode: 10008}, nil, true},
		{"legacy unavailable", &nats.APIError{Code: http.StatusServiceUnavailable, ErrorCode: 10008}, nil, true},
		{"timeout", context.DeadlineExceeded, nil, true},
		{"no responders", nats.ErrNoResponders, nil, true},
		{"watch creation cut short", context.Canceled, func() context.Context {
			ctx, cancel := context.WithCancelCause(context.Background())
			cancel(errCreateTimeout)
			return ctx
		}, true},
		{"caller gave up", context.Canceled, nil, false},
		{"connection lost", errLinkLost, nil, false},
		{"not connected", nats.ErrConnectionReconnecting, nil, false},
		{"permission", errors.Join(nats.ErrPermissionViolation), nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			iso := &isolation{start: time.Now()}
			ctx := context.Background()
			if tc.ctx != nil {
				ctx = tc.ctx()
			}
			iso.note(ctx, time.Now(), tc.err, true)
			assert.Equal(t, tc.failed, iso.failed.Load() != 0)
			iso.note(context.Background(), time.Now(), nil, false)
			assert.Equal(t, tc.failed, iso.failed.Load() != 0, "a read answered does not end the silence")
			iso.note(context.Background(), time.Now(), nil, true)
			assert.Zero(t, iso.unansweredFor(), "a write acknowledged ends the silence")
		})
	}
}
