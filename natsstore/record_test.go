package natsstore

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
)

func TestRecordRoundTrip(t *testing.T) {
	// The largest metadata a claim may carry, every byte escaped.
	big := map[string]string{}
	for i := range lease.MaxMetaEntries {
		big[fmt.Sprintf("k%02d", i)] = strings.Repeat("%", lease.MaxMetaBytes/lease.MaxMetaEntries-3)
	}
	require.NoError(t, lease.ValidateMeta(big))
	for _, r := range []record{
		{Kind: kindHeld, Owner: "runtime-0123456789abcdef0123456789abcdef", Term: "0123456789abcdef01234567",
			TTL: 30 * time.Second, Acquired: 1_700_000_000_000, Nonce: 0xdeadbeefcafef00d},
		{Kind: kindHeld, Owner: "o", Term: "t", Token: 42, TTL: time.Millisecond, Nonce: 0,
			Meta: map[string]string{"addr": "10.0.0.7:8080", "note": "a b&c=d%e+f", "zone": "Zürich"}},
		{Kind: kindReleased, Owner: "owner-a", Term: "t", Token: 1<<64 - 1, Acquired: 1, Nonce: 1<<64 - 1},
		{Kind: kindHeld, Owner: strings.Repeat("x", 255), Term: strings.Repeat("t", lease.MaxTermLen), Token: 7,
			TTL: 290 * 365 * 24 * time.Hour, Meta: big},
		{V1: true, Kind: kindHeld, Owner: "first-release", TTL: time.Second, Nonce: 3},
	} {
		b := appendRecord(nil, r)
		assert.LessOrEqual(t, len(b), maxRecordLen)
		got, err := parseRecord(b)
		require.NoError(t, err, "%s", b)
		assert.Equal(t, r, got)
	}
	assert.Equal(t, "aster.lease/2 held owner-a t1 0 1500 1700000000000 00000000000000ff addr=10.0.0.7%3A80&pod=b-7",
		string(appendRecord(nil, record{Kind: kindHeld, Owner: "owner-a", Term: "t1", TTL: 1500 * time.Millisecond,
			Acquired: 1_700_000_000_000, Nonce: 255, Meta: map[string]string{"pod": "b-7", "addr": "10.0.0.7:80"}})))
	assert.Equal(t, "aster.lease/2 released owner-a t1 9 0 0 0000000000000001 -",
		string(appendRecord(nil, record{Kind: kindReleased, Owner: "owner-a", Term: "t1", Token: 9, Nonce: 1})))
}

// Values written by the first release are still read, with an empty term:
// such a key is held by someone else until it is released or expires.
func TestRecordReadsVersion1(t *testing.T) {
	r, err := parseRecord([]byte("aster.lease/1 held owner-a 0 1500 1700000000000 00000000000000ff"))
	require.NoError(t, err)
	assert.Equal(t, record{V1: true, Kind: kindHeld, Owner: "owner-a", TTL: 1500 * time.Millisecond,
		Acquired: 1_700_000_000_000, Nonce: 255}, r)
	assert.Error(t, lease.ValidateTerm(r.Term), "no claim can have a version 1 record's term")
}

func TestRecordRejects(t *testing.T) {
	const good = "aster.lease/2 held owner-a t1 0 1500 1700000000000 00000000000000ff k=v"
	_, err := parseRecord([]byte(good))
	require.NoError(t, err)
	for _, tc := range []struct{ name, value, reason string }{
		{"empty", "", "not an aster lease record"},
		{"json", `{"owner":"a"}`, "not an aster lease record"},
		{"newer version", "aster.lease/4 held owner-a t1 0 1500 0 00000000000000ff -", "newer version"},
		{"too long", good + strings.Repeat(" ", maxRecordLen), "bytes long"},
		{"missing field", "aster.lease/2 held owner-a t1 0 1500 00000000000000ff k=v", "fields"},
		{"version 1 with a term", "aster.lease/1 held owner-a t1 0 1500 1700000000000 00000000000000ff", "fields"},
		{"bad term", strings.Replace(good, " t1 ", " t\x01 ", 1), "bad term"},
		{"empty metadata query", strings.Replace(good, " k=v", " &", 1), "bad metadata"},
		{"repeated metadata key", strings.Replace(good, " k=v", " k=v&k=w", 1), "appears 2 times"},
		{"bad metadata key", strings.Replace(good, " k=v", " a%20b=v", 1), "bad metadata"},
		{"bad metadata escape", strings.Replace(good, " k=v", " k=%zz", 1), "bad metadata"},
		{"unsorted metadata", strings.Replace(good, " k=v", " z=1&a=2", 1), "canonical"},
		{"metadata escaped needlessly", strings.Replace(good, " k=v", " k=%76", 1), "canonical"},
		{"extra field", good + " x", "fields"},
		{"double space", strings.Replace(good, " ", "  ", 1), "fields"},
		{"unknown kind", strings.Replace(good, "held", "taken", 1), "unknown kind"},
		{"bad owner", strings.Replace(good, "owner-a", "owner\x01a", 1), "bad owner"},
		{"negative token", strings.Replace(good, " 0 ", " -1 ", 1), "bad token"},
		{"signed token", strings.Replace(good, " 0 ", " +0 ", 1), "bad token"},
		{"leading zero token", strings.Replace(good, " 0 ", " 00 ", 1), "canonical"},
		{"token overflow", strings.Replace(good, " 0 ", " 18446744073709551616 ", 1), "bad token"},
		{"negative ttl", strings.Replace(good, " 1500 ", " -1500 ", 1), "bad TTL"},
		{"huge ttl", strings.Replace(good, " 1500 ", " 9223372036854775807 ", 1), "bad TTL"},
		{"held without ttl", strings.Replace(good, " 1500 ", " 0 ", 1), "without a TTL"},
		{"released with ttl", strings.Replace(good, "held", "released", 1), "released with a TTL"},
		{"bad time", strings.Replace(good, "1700000000000", "yesterday", 1), "bad acquisition time"},
		{"short nonce", strings.Replace(good, "00000000000000ff", "ff", 1), "bad nonce"},
		{"bad nonce", strings.Replace(good, "00000000000000ff", "00000000000000fg", 1), "bad nonce"},
		{"upper-case nonce", strings.Replace(good, "00000000000000ff", "00000000000000FF", 1), "canonical"},
		{"trailing newline", good + "\n", "bad metadata"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseRecord([]byte(tc.value))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.reason)
		})
	}
}

// FuzzParseRecord checks that the decoder never panics, and that whatever it
// accepts is in the one canonical form: encoding the result gives back the
// input, so two different values never decode to the same record.
func FuzzParseRecord(f *testing.F) {
	// More seeds are in testdata/fuzz/FuzzParseRecord.
	f.Add([]byte("aster.lease/1 held owner-a 0 1500 1700000000000 00000000000000ff"))
	f.Add([]byte("aster.lease/1 released owner-a 12 0 0 ffffffffffffffff"))
	f.Add([]byte("aster.lease/2 held owner-a t1 0 1500 1700000000000 00000000000000ff addr=10.0.0.7%3A80&pod=b-7"))
	f.Add([]byte("aster.lease/2 released owner-a t1 12 0 0 ffffffffffffffff -"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseRecord(b)
		if err != nil {
			return
		}
		if got := appendRecord(nil, r); string(got) != string(b) {
			t.Fatalf("accepted %q, which encodes back as %q", b, got)
		}
		if r.Kind != kindHeld && r.Kind != kindReleased {
			t.Fatalf("accepted kind %v", r.Kind)
		}
	})
}
