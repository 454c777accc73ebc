package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
)

// TestObservationJSONNamesThePreviousHolder: a handover's JSON line says
// whom the lease came from, as its text line does ("handover from …").
func TestObservationJSONNamesThePreviousHolder(t *testing.T) {
	seen := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	a := lease.Observation{LeaseID: "x", Held: true, Seen: seen, Revision: 5,
		Holder: lease.Holder{OwnerID: "pod-a", Token: 5, Term: "ta", TTL: 10 * time.Second}}
	b := lease.Observation{LeaseID: "x", Held: true, Seen: seen, Revision: 9,
		Holder: lease.Holder{OwnerID: "pod-b", Token: 9, Term: "tb", TTL: 10 * time.Second}}
	free := lease.Observation{LeaseID: "x", Seen: seen, Revision: 10}

	line, err := json.Marshal(observationOf(b, a, false))
	require.NoError(t, err)
	assert.JSONEq(t, `{"time":"2026-12-05T09:00:00Z","lease_id":"x","held":true,"owner_id":"pod-b","term":"tb",
		"token":9,"ttl":"10s","revision":9,"from":{"owner_id":"pod-a","token":5}}`, string(line))
	assert.Equal(t, &holderJSON{OwnerID: "pod-b", Token: 9}, observationOf(free, b, false).From)
	assert.Nil(t, observationOf(b, a, true).From, "the first line has no previous holder")
	assert.Nil(t, observationOf(a, free, false).From, "taken while free: no handover")
	assert.Nil(t, observationOf(a, lease.Observation{LeaseID: "x", Held: true}, false).From,
		"a value that is not a lease has no holder to name")
}
