package natsstore

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
)

// States a server reports for a stream it cannot read (nats-server 2.9.10
// reading storage written by 2.15.2, as measured) are told apart from every
// state a stream can have.
func TestUnreadableStreamState(t *testing.T) {
	for _, tc := range []struct {
		st   jetstream.StreamState
		want bool
	}{
		{jetstream.StreamState{}, false},
		{jetstream.StreamState{FirstSeq: 1, LastSeq: 0}, false},                                          // new
		{jetstream.StreamState{FirstSeq: 1 << 50, LastSeq: 1<<50 - 1}, false},                            // new, with a first sequence
		{jetstream.StreamState{Msgs: 3, FirstSeq: 3, LastSeq: 6}, false},                                 // interior deletes
		{jetstream.StreamState{FirstSeq: 7, LastSeq: 6}, false},                                          // purged
		{jetstream.StreamState{Msgs: 7, FirstSeq: 1, LastSeq: 6}, true},                                  // measured on 2.9.10
		{jetstream.StreamState{Msgs: 1, FirstSeq: 4613482128632936013, LastSeq: 1796110205548110}, true}, // measured on 2.9.10
		{jetstream.StreamState{FirstSeq: 9, LastSeq: 6}, true},
	} {
		assert.Equal(t, tc.want, bucketFacts{state: tc.st}.unreadable() != "", "%+v", tc.st)
	}
}

func TestVersionBefore(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want bool
	}{
		{"2.9.10", true}, {"2.10.0", false}, {"2.15.2", false}, {"1.4.0", true}, {"3.0.0", false},
		{"", false}, {"v2.9", false}, {"2.9.10-beta", true},
	} {
		assert.Equal(t, tc.want, versionBefore(tc.v, 2, 10), tc.v)
	}
}
