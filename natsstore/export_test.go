package natsstore

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DirectFree asks any replica for key as a standby does while reads wait
// for a meta leader (write_direct.go), for the deployment tests: it returns the
// revision at which the answer shows key free, or 0.
func DirectFree(ctx context.Context, s *Store, key string) (uint64, error) {
	deadline, _ := ctx.Deadline()
	err := s.writes.directFree(ctx, deadline, key, errors.New("a read refused in a test"))
	if f, ok := errors.AsType[*freeAt](err); ok {
		return f.rev, nil
	}
	return 0, err
}

// AnswerReads makes s see its reads of key through answer, which is given
// what the server answered: the deployment tests give a contender late or
// stale answers with it.
func AnswerReads(s *Store, key string, answer func(m *jetstream.RawStreamMsg, err error) (*jetstream.RawStreamMsg, error)) {
	s.kv = answeringKV{keyValue: s.kv, subject: s.subject + key, answer: answer}
}

type answeringKV struct {
	keyValue
	subject string
	answer  func(m *jetstream.RawStreamMsg, err error) (*jetstream.RawStreamMsg, error)
}

func (k answeringKV) GetLastMsgForSubject(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	m, err := k.keyValue.GetLastMsgForSubject(ctx, subject)
	if subject != k.subject {
		return m, err
	}
	return k.answer(m, err)
}

// SetClock makes s judge what it observes by now, a test's clock.
func SetClock(s *Store, now func() time.Time) { s.keys.now = now }
