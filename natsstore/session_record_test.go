package natsstore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSessionRecordRoundTrip(t *testing.T) {
	r := record{Kind: kindHeld, Owner: "owner-a", Term: "t1", TTL: 30 * time.Second, Acquired: 1_700_000_000_000,
		Nonce: 255, Session: "lock.session.s1", SessionTerm: "0123456789abcdef01234567"}
	b := appendRecord(nil, r)
	assert.Equal(t, "aster.lease/3 held owner-a t1 0 30000 1700000000000 00000000000000ff - lock.session.s1 "+
		"0123456789abcdef01234567", string(b))
	got, err := parseRecord(b)
	require.NoError(t, err)
	assert.Equal(t, r, got)
	assert.Equal(t, "lock.session.s1", got.holder(7).Session, "the holder names its session")

	r.Meta = map[string]string{"pod": "b-7"}
	got, err = parseRecord(appendRecord(nil, r))
	require.NoError(t, err)
	assert.Equal(t, r, got)
}

func TestSessionRecordRejects(t *testing.T) {
	for _, tc := range []struct{ name, value, reason string }{
		{"missing session", "aster.lease/3 held owner-a t1 0 30000 0 00000000000000ff -", "9 fields, 11 expected"},
		{"bad session", "aster.lease/3 held owner-a t1 0 30000 0 00000000000000ff - .s t2", "bad session"},
		{"bad session term", "aster.lease/3 held owner-a t1 0 30000 0 00000000000000ff - s t\x01", "bad session term"},
		{"released", "aster.lease/3 released owner-a t1 5 0 0 00000000000000ff - s t2", "a session in a released record"},
		{"no TTL", "aster.lease/3 held owner-a t1 0 0 0 00000000000000ff - s t2", "held without a TTL"},
		{"session in version 2", "aster.lease/2 held owner-a t1 0 30000 0 00000000000000ff - s t2", "11 fields, 9 expected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseRecord([]byte(tc.value))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.reason)
		})
	}
}
