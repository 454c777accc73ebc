package natsstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// keyValue is the part of a JetStream KV bucket that Store uses: a
// conditional publish to a key's subject, a read of a key's last message
// (markers included, with headers), and a watch of one key or prefix. jsBucket
// implements it over nats.go; tests wrap it to inject faults.
type keyValue interface {
	// PublishMsg writes m, with the conditions its headers set, to the
	// bucket's stream, answering as jetstream.Publisher does.
	PublishMsg(ctx context.Context, m *nats.Msg) (*jetstream.PubAck, error)
	// GetLastMsgForSubject returns the last message stored on subject, or
	// an error matching jetstream.ErrMsgNotFound.
	GetLastMsgForSubject(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error)
	// Watch watches the keys filter matches (a key, or a pattern): see
	// consumerWatch.
	Watch(ctx context.Context, filter string) (jetstream.KeyWatcher, error)
}

// jsBucket is a keyValue over nats.go's jetstream package.
type jsBucket struct {
	jetstream.Publisher
	nc     *nats.Conn
	msgGet string // "$JS.API.STREAM.MSG.GET.KV_<bucket>", with the domain or API prefix

	// For watches (consumerWatch).
	api           string // the JetStream API prefix, ending with '.'
	bucket        string
	stream        string        // "KV_<bucket>"
	pre           string        // "$KV.<bucket>."
	heartbeat     time.Duration // the consumers' idle heartbeat interval
	silence       time.Duration // a watch that receives nothing for this long ends; 0: never
	deleteTimeout time.Duration // bounds a consumer's delete
}

var _ keyValue = (*jsBucket)(nil)

type msgGetRequest struct {
	LastBySubject string `json:"last_by_subj"`
}

type msgGetResponse struct {
	Error   *jetstream.APIError `json:"error,omitempty"`
	Message *struct {
		Subject  string    `json:"subject"`
		Sequence uint64    `json:"seq"`
		Header   []byte    `json:"hdrs,omitempty"`
		Data     []byte    `json:"data,omitempty"`
		Time     time.Time `json:"time"`
	} `json:"message,omitempty"`
}

// GetLastMsgForSubject reads through the stream leader (STREAM.MSG.GET),
// not a direct get, which a follower of a replicated bucket may answer with
// a value older than a write already acknowledged: a read that resolves an
// indeterminate write must see it if it landed.
func (b *jsBucket) GetLastMsgForSubject(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	req, err := json.Marshal(msgGetRequest{LastBySubject: subject})
	if err != nil {
		return nil, err
	}
	resp, err := b.nc.RequestWithContext(ctx, b.msgGet, req)
	if err != nil {
		return nil, err
	}
	var r msgGetResponse
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return nil, fmt.Errorf("%w: %v", jetstream.ErrInvalidJSAck, err)
	}
	if r.Error != nil {
		if r.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound {
			return nil, jetstream.ErrMsgNotFound
		}
		return nil, r.Error
	}
	if r.Message == nil {
		return nil, fmt.Errorf("%w: no message in the answer", jetstream.ErrInvalidJSAck)
	}
	m := &jetstream.RawStreamMsg{
		Subject:  r.Message.Subject,
		Sequence: r.Message.Sequence,
		Data:     r.Message.Data,
		Time:     r.Message.Time,
	}
	if len(r.Message.Header) > 0 {
		if m.Header, err = nats.DecodeHeadersMsg(r.Message.Header); err != nil {
			return nil, fmt.Errorf("%w: headers: %v", jetstream.ErrInvalidJSAck, err)
		}
	}
	return m, nil
}

// apiPrefix returns the JetStream API prefix of js, ending with '.'.
func apiPrefix(js jetstream.JetStream) string {
	o := js.Options()
	switch {
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	case o.APIPrefix != "":
		if o.APIPrefix[len(o.APIPrefix)-1] != '.' {
			return o.APIPrefix + "."
		}
		return o.APIPrefix
	default:
		return jetstream.DefaultAPIPrefix
	}
}
