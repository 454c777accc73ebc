package natsstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/asterforge/aster/internal/natstest"
)

func TestReadAck(t *testing.T) {
	for _, tc := range []struct {
		in   string
		fast bool // parseAck reads it
		want *jetstream.PubAck
		err  string
	}{
		{in: `{"stream":"KV_leases","seq":1234567}`, fast: true, want: &jetstream.PubAck{Stream: "KV_leases", Sequence: 1234567}},
		{in: `{"stream":"KV_leases","domain":"hub","seq":7,"duplicate":true}`, fast: true,
			want: &jetstream.PubAck{Stream: "KV_leases", Domain: "hub", Sequence: 7, Duplicate: true}},
		{in: `{"seq":18446744073709551615,"stream":"s","duplicate":false}`, fast: true,
			want: &jetstream.PubAck{Stream: "s", Sequence: 1<<64 - 1}},
		{in: `{"stream":"a","stream":"b","seq":1,"seq":2}`, fast: true, want: &jetstream.PubAck{Stream: "b", Sequence: 2}},
		{in: `{ "stream": "s", "seq": 3 }`, want: &jetstream.PubAck{Stream: "s", Sequence: 3}},
		{in: `{"stream":"s\u0041","seq":3}`, want: &jetstream.PubAck{Stream: "sA", Sequence: 3}},
		{in: `{"Stream":"s","seq":3}`, want: &jetstream.PubAck{Stream: "s", Sequence: 3}},
		{in: `{"stream":"s","seq":3,"val":"9"}`, want: &jetstream.PubAck{Stream: "s", Sequence: 3, Value: "9"}},
		{in: `{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 5"},"stream":"s","seq":0}`,
			err: "nats: nats: API error: code=400 err_code=10071 description=wrong last sequence: 5"},
		{in: `{"stream":"","seq":3}`, err: jetstream.ErrInvalidJSAck.Error()},
		{in: `{"seq":3}`, err: jetstream.ErrInvalidJSAck.Error()},
		{in: `{}`, err: jetstream.ErrInvalidJSAck.Error()},
		{in: `{"stream":"s","seq":18446744073709551616}`, err: jetstream.ErrInvalidJSAck.Error()},
		{in: `{"stream":"s","seq":03}`, err: jetstream.ErrInvalidJSAck.Error()},
		{in: `{"stream":"s","seq":-3}`, err: jetstream.ErrInvalidJSAck.Error()},
		{in: `{"stream":"s","seq":3}x`, err: jetstream.ErrInvalidJSAck.Error()},
		{in: `{"stream":"s","seq":3,}`, err: jetstream.ErrInvalidJSAck.Error()},
		{in: `{"stream":"s","seq":3`, err: jetstream.ErrInvalidJSAck.Error()},
		{in: ``, err: jetstream.ErrInvalidJSAck.Error()},
	} {
		_, fast := parseAck([]byte(tc.in))
		assert.Equal(t, tc.fast, fast, "parseAck reads %s", tc.in)
		got, err := readAck([]byte(tc.in))
		if tc.err != "" {
			assert.EqualError(t, err, tc.err, tc.in)
			continue
		}
		if assert.NoError(t, err, tc.in) {
			assert.Equal(t, tc.want, got, tc.in)
		}
	}
	_, err := readAck([]byte(`{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 5"}}`))
	assert.True(t, isConflict(err), "a refused compare-and-swap is a conflict: %v", err)
}

// The grammar of the acknowledgements the tests try: keys and values,
// usual and not.
var (
	ackFields = []string{`"stream"`, `"seq"`, `"domain"`, `"duplicate"`, `"stream"`, `"seq"`, `"domain"`, `"duplicate"`,
		`"Seq"`, `"error"`, `"val"`, `"x"`, `"stre\u0061m"`}
	ackStrs = []string{`"KV_a"`, `""`, `"a b"`, `"\u00e9"`, `"a\"b"`, "\"\xff\"", "\"a\x01\"", `"~"`}
	ackNums = []string{`0`, `1`, `42`, `007`, `00`, `-1`, `1.5`, `2e3`, `18446744073709551615`, `18446744073709551616`,
		`99999999999999999999`}
	ackOther    = []string{`true`, `false`, `null`, `{}`, `[]`, `{"code":400,"err_code":10071,"description":"wrong last sequence"}`}
	ackValues   = append(append(append([]string(nil), ackStrs...), ackNums...), ackOther...)
	ackValuesOf = map[string][]string{`"stream"`: ackStrs, `"domain"`: ackStrs, `"seq"`: ackNums, `"duplicate"`: ackOther[:3]}
)

// sameAsJSON checks that what parseAck reads of in, encoding/json reads
// alike, and that readAck answers in as jetstream.Publisher would.
func sameAsJSON(t require.TestingT, in []byte) {
	want, wantErr := decodeAck(in)
	if ack, ok := parseAck(in); ok {
		require.NoError(t, wantErr, "parseAck read %s, which encoding/json refuses", in)
		require.Equal(t, want, ack, "%s", in)
	}
	got, err := readAck(in)
	if wantErr != nil {
		require.EqualError(t, err, wantErr.Error(), "%s", in)
		return
	}
	require.NoError(t, err, "%s", in)
	require.Equal(t, want, got, "%s", in)
}

// Every key with every value, alone, before and after a stream's name.
func TestParseAckEveryFieldAndValue(t *testing.T) {
	for _, k := range ackFields {
		for _, v := range ackValues {
			for _, f := range []string{"{%s:%s}", `{"stream":"KV_a",%s:%s}`, `{%s:%s,"stream":"KV_a"}`} {
				sameAsJSON(t, []byte(fmt.Sprintf(f, k, v)))
			}
		}
	}
}

// Whatever parseAck reads, it reads as encoding/json does; and readAck
// answers every input as jetstream.Publisher would.
func TestParseAckIsJSON(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var b strings.Builder
		b.WriteString("{")
		n := rapid.IntRange(0, 6).Draw(t, "fields")
		if rapid.Bool().Draw(t, "usual") { // the server's shape, but for the values
			b.WriteString(`"stream":"KV_a",`)
		}
		for i := range n {
			if i > 0 {
				b.WriteString(rapid.SampledFrom([]string{",", ",", ",", ", ", ",,"}).Draw(t, "comma"))
			}
			key := rapid.SampledFrom(ackFields).Draw(t, "key")
			b.WriteString(key)
			b.WriteString(rapid.SampledFrom([]string{":", ":", ":", " : "}).Draw(t, "colon"))
			vs, ok := ackValuesOf[key]
			if !ok || rapid.IntRange(0, 4).Draw(t, "any value") == 0 {
				vs = ackValues
			}
			b.WriteString(rapid.SampledFrom(vs).Draw(t, "value"))
		}
		b.WriteString(rapid.SampledFrom([]string{"}", "}", "}", "} ", "", "}}"}).Draw(t, "end"))
		in := []byte(b.String())
		if rapid.IntRange(0, 3).Draw(t, "cut") == 0 && len(in) > 0 {
			in = in[:rapid.IntRange(0, len(in)-1).Draw(t, "at")]
		}
		sameAsJSON(t, in)
	})
}

// Fuzzing beside the rapid property: go test runs the seeds.
func FuzzParseAck(f *testing.F) {
	for _, s := range []string{`{"stream":"KV_a","seq":1}`, `{"stream":"a","domain":"d","seq":2,"duplicate":true}`,
		`{"error":{"code":503,"description":"no leader"}}`, `{"stream":"a","seq":01}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if ack, ok := parseAck(in); ok {
			want, err := decodeAck(in)
			require.NoError(t, err, "parseAck read %q, which encoding/json refuses", in)
			require.Equal(t, want, ack, "%q", in)
		}
	})
}

// jsBucket.PublishMsg answers as jetstream.Publisher does, on a real
// server: a write that lands, a refused compare-and-swap, a subject no
// stream takes.
func TestPublishMsgAnswersAsThePublisher(t *testing.T) {
	srv := natstest.Start(t)
	js := natstest.JetStream(t, srv.ClientURL())
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "acks", LimitMarkerTTL: time.Second})
	require.NoError(t, err)
	b := &jsBucket{Publisher: js, nc: js.Conn()}
	both := func(subject string, expect uint64) (fast, slow *jetstream.PubAck, fastErr, slowErr error) {
		m := func(key string) *nats.Msg {
			return &nats.Msg{Subject: subject + key, Data: []byte("v"), Header: writeHeader(kindHeld, expect, 5*time.Second)}
		}
		fast, fastErr = b.PublishMsg(ctx, m("fast"))
		slow, slowErr = js.PublishMsg(ctx, m("slow"))
		return fast, slow, fastErr, slowErr
	}

	fast, slow, fastErr, slowErr := both("$KV.acks.", 0)
	require.NoError(t, fastErr)
	require.NoError(t, slowErr)
	assert.Equal(t, slow.Stream, fast.Stream)
	assert.Equal(t, slow.Sequence, fast.Sequence+1, "the fast path's write is the first")

	_, _, fastErr, slowErr = both("$KV.acks.", 7)
	require.Error(t, fastErr)
	assert.True(t, isConflict(fastErr), "%v", fastErr)
	var fastAPI, slowAPI *jetstream.APIError
	require.ErrorAs(t, fastErr, &fastAPI)
	require.ErrorAs(t, slowErr, &slowAPI)
	assert.Equal(t, slowAPI.Code, fastAPI.Code)
	assert.Equal(t, slowAPI.ErrorCode, fastAPI.ErrorCode)

	_, _, fastErr, slowErr = both("nostream.", 0)
	assert.ErrorIs(t, slowErr, jetstream.ErrNoStreamResponse)
	assert.ErrorIs(t, fastErr, jetstream.ErrNoStreamResponse)
	assert.True(t, noLeader(fastErr))
}
