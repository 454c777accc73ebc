package natsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// PublishMsg publishes m as jetstream.Publisher does (asking again when
// no stream answers, DefaultPubRetryAttempts times, DefaultPubRetryWait
// apart), with the same outcomes and errors, but reads the stream's
// acknowledgement without encoding/json when it has the usual shape
// (parseAck): decoding it took a fifth of a renewal's client CPU. Its
// conditions are m's headers (writeHeader). A call whose ctx has no
// deadline is the Publisher's, which then applies its default timeout.
func (b *jsBucket) PublishMsg(ctx context.Context, m *nats.Msg) (*jetstream.PubAck, error) {
	if _, ok := ctx.Deadline(); !ok {
		return b.Publisher.PublishMsg(ctx, m)
	}
	resp, err := b.nc.RequestMsgWithContext(ctx, m)
	for r := 0; errors.Is(err, nats.ErrNoResponders) && r < jetstream.DefaultPubRetryAttempts; r++ {
		t := time.NewTimer(jetstream.DefaultPubRetryWait)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		resp, err = b.nc.RequestMsgWithContext(ctx, m)
	}
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, jetstream.ErrNoStreamResponse
	}
	if err != nil {
		return nil, err
	}
	return readAck(resp.Data)
}

// readAck reads a publish acknowledgement as jetstream.Publisher does.
func readAck(data []byte) (*jetstream.PubAck, error) {
	if ack, ok := parseAck(data); ok {
		return ack, nil
	}
	return decodeAck(data)
}

// decodeAck reads a publish acknowledgement with encoding/json, as
// jetstream.Publisher does (its publishMsg), errors included.
func decodeAck(data []byte) (*jetstream.PubAck, error) {
	var r struct {
		Error *jetstream.APIError `json:"error,omitempty"`
		*jetstream.PubAck
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, jetstream.ErrInvalidJSAck
	}
	if r.Error != nil {
		return nil, fmt.Errorf("nats: %w", r.Error)
	}
	if r.PubAck == nil || r.Stream == "" {
		return nil, jetstream.ErrInvalidJSAck
	}
	return r.PubAck, nil
}

// parseAck reads a successful acknowledgement in the shape the server
// writes one: a compact object of "stream", "seq" and optionally "domain"
// and "duplicate", with plain ASCII strings. It gives what encoding/json
// would, and false for anything else (an error, another field, white
// space, escapes), which readAck then decodes with encoding/json.
func parseAck(b []byte) (*jetstream.PubAck, bool) {
	var ack jetstream.PubAck
	if len(b) < 2 || b[0] != '{' {
		return nil, false
	}
	b = b[1:]
	for {
		var ok bool
		if b, ok = parseAckField(&ack, b); !ok {
			return nil, false
		}
		switch {
		case len(b) == 1 && b[0] == '}':
			return &ack, ack.Stream != ""
		case len(b) > 1 && b[0] == ',':
			b = b[1:]
		default:
			return nil, false
		}
	}
}

// parseAckField reads one "key":value of an acknowledgement into ack and
// returns what follows it.
func parseAckField(ack *jetstream.PubAck, b []byte) ([]byte, bool) {
	key, b, ok := parseString(b)
	if !ok || len(b) == 0 || b[0] != ':' {
		return nil, false
	}
	b = b[1:]
	switch key {
	case "stream":
		ack.Stream, b, ok = parseString(b)
	case "domain":
		ack.Domain, b, ok = parseString(b)
	case "seq":
		ack.Sequence, b, ok = parseUint(b)
	case "duplicate":
		ack.Duplicate, b, ok = parseBool(b)
	default:
		return nil, false
	}
	return b, ok
}

// parseString reads a JSON string of printable ASCII without escapes.
func parseString(b []byte) (string, []byte, bool) {
	if len(b) == 0 || b[0] != '"' {
		return "", nil, false
	}
	for i := 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return string(b[1:i]), b[i+1:], true
		case c < 0x20 || c > 0x7e || c == '\\':
			return "", nil, false
		}
	}
	return "", nil, false
}

// parseUint reads a JSON number that is a uint64 without a sign, leading
// zero, fraction or exponent.
func parseUint(b []byte) (uint64, []byte, bool) {
	var n uint64
	i := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		d := uint64(b[i] - '0')
		if n > (1<<64-1-d)/10 {
			return 0, nil, false
		}
		n = n*10 + d
	}
	if i == 0 || i > 1 && b[0] == '0' || i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E') {
		return 0, nil, false
	}
	return n, b[i:], true
}

// parseBool reads a JSON true or false.
func parseBool(b []byte) (bool, []byte, bool) {
	switch {
	case len(b) >= 4 && string(b[:4]) == "true":
		return true, b[4:], true
	case len(b) >= 5 && string(b[:5]) == "false":
		return false, b[5:], true
	}
	return false, nil, false
}
