package natsstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/asterforge/aster/lease"
)

// While JetStream's meta group has no leader, every server of a cluster
// answers a read of the bucket's stream (STREAM.MSG.GET) with 503 "JetStream
// system temporarily unavailable", although the stream has a leader and
// takes writes: after a partition healed, a cluster stayed so for 3.5 to
// 7.8 s (chaos records), and a standby whose watch was down (a watch's
// consumer needs the meta leader too) could not read the lost holder's key
// and waited all of it out.
//
// A direct get (DIRECT.GET) is answered without the meta group, by any
// replica of the stream, so possibly by one behind the leader: its answer
// is never judged as a read is. Acquire uses it only to find the key free
// (a release marker, or an expiry marker once confirmExpiry trusts it, as
// judge trusts one it read) and then writes at its revision. The write's
// expected revision is what proves the answer current: the stream leader
// refuses it if the key moved on, and the key is read again. A direct
// answer that shows the key held, or empty, is not acted on; the read's
// error stands.

// directWait bounds a direct get: a user without the permission for it
// (optional, see docs/nats.md) gets no answer, and the read it stands in
// for is sent again meanwhile.
const directWait = 200 * time.Millisecond

// errCodeClusterNotAvailable is JetStream's error code for "JetStream system
// temporarily unavailable", its answer while its meta group has no leader.
const errCodeClusterNotAvailable jetstream.ErrorCode = 10008

// metaLeaderless reports whether err is JetStream's answer to a read while
// its meta group has no leader.
func metaLeaderless(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeClusterNotAvailable
}

// freeAt is what a direct get found: the key free at rev, while a read was
// refused with the error read.
type freeAt struct {
	rev  uint64
	read error
}

func (f *freeAt) Error() string {
	return fmt.Sprintf("natsstore: a direct get shows the key free at revision %d (a read: %v)", f.rev, f.read)
}

// directFree asks any replica of the bucket's stream for key's last
// message, after a read of it was refused with readErr for want of a meta
// leader. It returns a *freeAt when the answer shows the key free, an error
// matching lease.ErrStoreConfig when it shows an expiry marker of a bucket
// that changed, and nil otherwise.
func (w *writes) directFree(ctx context.Context, deadline time.Time, key string, readErr error) error {
	if w.nc == nil || w.directPrefix == "" {
		return nil
	}
	dctx, cancel := context.WithTimeout(ctx, directWait)
	defer cancel()
	resp, err := w.nc.RequestWithContext(dctx, w.directPrefix+w.subject+key, nil)
	if err != nil {
		return nil
	}
	m, err := directMsg(resp, "KV_"+w.bucket)
	if err != nil {
		return nil
	}
	kind, rec, _ := w.classify(key, m)
	if kind != msgFree {
		return nil
	}
	if rec.Kind != kindReleased {
		if ok, err := w.trustMarker(ctx, deadline, key); !ok {
			return err
		}
	}
	w.log.Info("natsstore: reads wait for JetStream's meta leader; a direct get shows the key free: writing at its revision",
		"lease", key, "revision", m.Sequence, "read", readErr)
	return &freeAt{rev: m.Sequence, read: readErr}
}

// trustMarker reports whether an expiry marker of key that was not read
// through the stream leader (a watch delivered it, or a direct get showed
// it) may be written at: confirmExpiry passes, as judge requires of one it
// read. Only a bucket found changed (ErrStoreConfig) is an error; a marker
// that cannot be confirmed now is not trusted, and the key is read.
func (w *writes) trustMarker(ctx context.Context, deadline time.Time, key string) (bool, error) {
	err := w.confirmExpiry(ctx, deadline, key)
	if errors.Is(err, lease.ErrStoreConfig) {
		return false, err
	}
	return err == nil, nil
}

// directRefusal reports whether err is the server's refusal of a direct
// get, which a user may lack the permission for: the read it stands in for
// reports the failure.
func directRefusal(err error) bool {
	v, ok := parseViolation(err)
	return ok && !v.subscribe && strings.Contains(v.subject, ".DIRECT.GET.KV_")
}

// directMsg decodes a direct get's answer from stream: the message, with its
// headers, as a read returns it.
func directMsg(resp *nats.Msg, stream string) (*jetstream.RawStreamMsg, error) {
	h := resp.Header
	if h == nil || h.Get("Status") != "" {
		return nil, fmt.Errorf("natsstore: direct get answered %q %q", h.Get("Status"), h.Get("Description"))
	}
	if got := h.Get(jetstream.StreamHeader); got != stream {
		return nil, fmt.Errorf("natsstore: direct get answered from stream %q, not %q", got, stream)
	}
	seq, err := strconv.ParseUint(h.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil || seq == 0 {
		return nil, fmt.Errorf("natsstore: direct get answered without a sequence: %q", h.Get(jetstream.SequenceHeader))
	}
	return &jetstream.RawStreamMsg{Subject: h.Get(jetstream.SubjectHeader), Sequence: seq, Header: h, Data: resp.Data}, nil
}
