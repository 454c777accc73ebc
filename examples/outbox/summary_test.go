//go:build unix

package main

import (
	"bytes"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
)

// crashRecord is a recorder after one start and one crash: i1 took the
// lease (token 10), renewed it at +300 ms and +600 ms, was killed at
// +700 ms, and i2 acquired the lease (token 13) at +2.65 s, 50 ms after the
// TTL of 2 s ran out since the last renewal the watch saw.
func crashRecord(t0 time.Time) *recorder {
	r := newRecorder()
	r.start = t0
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	held := func(token, rev uint64) lease.Event {
		return lease.Event{LeaseID: defaultLeaseID, Kind: lease.EventHeld, Revision: rev,
			Holder: lease.Holder{OwnerID: "o", Token: lease.Token(token), TTL: 2 * time.Second}}
	}
	r.actions = []action{{at: at(0), kind: actStart, inst: "i1"}, {at: at(700), kind: actKill, inst: "i1", token: 10}}
	r.terms[10] = &term{token: 10, inst: "i1", acquired: at(10), firstWrite: at(11), firstAt: at(12), accepted: 3,
		ended: at(700)}
	r.terms[13] = &term{token: 13, inst: "i2", acquired: at(2650), firstWrite: at(2651), firstAt: at(2652), accepted: 2}
	r.watch = []watchRec{{at(10), held(10, 10)}, {at(300), held(10, 11)}, {at(600), held(10, 12)}, {at(2651), held(13, 13)}}
	for _, tok := range []uint64{10, 10, 10, 13, 13} {
		r.writes = append(r.writes, writeRec{req: writeReq{Token: tok}, accepted: true})
	}
	return r
}

// TestSummaryFreeAfterTheTTL: a crashed leader's key is written over, never
// freed, and the summary counts the lease free one TTL after the last
// renewal the watch saw (not "?").
func TestSummaryFreeAfterTheTTL(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	s := summarize(crashRecord(t0), options{ttl: 2 * time.Second})
	require.Len(t, s.Handovers, 2)
	h := s.Handovers[1]
	assert.Equal(t, "crash", h.Kind)
	assert.Equal(t, t0.Add(2600*time.Millisecond), h.Free, "the last renewal (+600 ms) plus the TTL")
	assert.Equal(t, 1900*time.Millisecond, between(h.Trigger, h.Free))

	var out bytes.Buffer
	s.print(&out)
	assert.Regexp(t, `\n  1\s+crash\s+i1 → i2\s+10 → 13\s+1\.9s\s+1\.95s\s+1\.952s\n`, out.String())

	// A renewal the watch saw late: the TTL counted from it ends after the
	// acquisition, which is not a measurement of when the lease was free.
	r := crashRecord(t0)
	r.watch[2].at = t0.Add(time.Second)
	s = summarize(r, options{ttl: 2 * time.Second})
	assert.True(t, s.Handovers[1].Free.IsZero(), "free at %v, after the acquisition", s.Handovers[1].Free)
}

// TestSummaryWithoutTerms: nothing was accepted, and nothing is listed.
func TestSummaryWithoutTerms(t *testing.T) {
	var out bytes.Buffer
	(&summary{TTL: time.Second, Accepted: map[uint64]int{}, Increasing: true}).print(&out)
	assert.Regexp(t, `\n  accepted writes +0\n`, out.String())
	assert.NotContains(t, out.String(), "()")
}

// shape reduces a line of the summary to its format: tokens, durations,
// instance names and numbers become placeholders, runs of spaces one space.
func shape(line string) string {
	for _, r := range []struct{ re, with string }{
		{`…\d+`, "TOKEN"},
		{`\d+(\.\d+)?(ms|µs|ns|s)\b`, "DUR"},
		{`\bi\d\b`, "INST"},
		{`\d+`, "N"},
		{` +`, " "},
	} {
		line = regexp.MustCompile(r.re).ReplaceAllString(line, r.with)
	}
	return strings.TrimRight(line, " ")
}

// TestREADMESample keeps the README's sample output in step with the
// summary this demo prints: every line of the sample has the shape of a
// line the summary prints, in the same order, and the sample shows the
// whole summary, with every handover's "lease free after" measured.
func TestREADMESample(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(readme), "```\nSummary (")
	require.True(t, ok, "the README's sample begins with the summary's first line")
	sample, _, ok := strings.Cut("Summary ("+rest, "```")
	require.True(t, ok)

	// A summary like the README's: a start and three handovers, one of them
	// a crash as recorded above, with long tokens.
	t0 := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	s := summarize(crashRecord(t0), options{ttl: 2 * time.Second})
	s.Complete, s.Elapsed = true, 7741*time.Millisecond
	s.Tokens = []uint64{10, 13, 15, 18}
	for i := range s.Tokens {
		s.Tokens[i] += 1_796_461_648_999_000
	}
	hs := s.Handovers
	for i := range hs {
		hs[i].FromToken, hs[i].ToToken = hs[i].FromToken+1_796_461_648_999_000, hs[i].ToToken+1_796_461_648_999_000
	}
	pause, graceful := hs[1], hs[1]
	pause.Kind, graceful.Kind = "pause", "graceful"
	s.Handovers = append(hs, pause, graceful)
	accepted := map[uint64]int{}
	for _, tok := range s.Tokens {
		accepted[tok] = 3
	}
	s.Accepted, s.Terms, s.Pairs = accepted, 4, 6
	s.Rejected = []writeRec{{req: writeReq{Inst: "i2", Token: s.Tokens[0], Late: true}, highest: s.Tokens[1]}}
	var out bytes.Buffer
	s.print(&out)

	printed := strings.Split(strings.TrimSpace(out.String()), "\n")
	lines := strings.Split(strings.TrimSpace(sample), "\n")
	assert.Equal(t, len(printed), len(lines), "the sample is the whole summary:\n%s", out.String())
	next := 0
	for _, line := range lines {
		found := false
		for ; next < len(printed); next++ {
			if shape(printed[next]) == shape(line) {
				found, next = true, next+1
				break
			}
		}
		assert.True(t, found, "README line %q (shape %q) is not printed, in this order:\n%s", line, shape(line), out.String())
	}
	for _, line := range lines {
		if strings.Contains(line, "crash") || strings.Contains(line, "pause") {
			assert.NotContains(t, line, "?", "the demo measures when the lease was free: %q", line)
		}
	}
}

// stopped is a store whose Err is err.
type stopped struct{ err error }

func (s stopped) Err() error { return s.err }

// TestStoreStopped: an instance whose store had stopped fails, even when
// its supervisor stopped cleanly on SIGTERM; one whose store works does
// not, and the supervisor's own error comes first.
func TestStoreStopped(t *testing.T) {
	gone := errors.New(`natsstore: bucket "aster_demo" deleted`)
	assert.NoError(t, storeStopped(nil, stopped{}))
	err := storeStopped(nil, stopped{gone})
	require.ErrorIs(t, err, gone)
	assert.EqualError(t, err, `the lease store had stopped: natsstore: bucket "aster_demo" deleted`)
	own := errors.New("supervisor failed")
	assert.Equal(t, own, storeStopped(own, stopped{gone}))
}
