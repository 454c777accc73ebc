package lease_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
)

func TestNewTermIsFreshAndValid(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		term := lease.NewTerm()
		require.NoError(t, lease.ValidateTerm(term))
		require.Len(t, term, 24)
		require.False(t, seen[term], "NewTerm repeated %q", term)
		seen[term] = true
	}
}

func TestValidateTerm(t *testing.T) {
	for _, tc := range []struct {
		term string
		ok   bool
	}{
		{"a", true},
		{"node-7/0123abcd/1z", true},
		{strings.Repeat("x", lease.MaxTermLen), true},
		{"", false},
		{strings.Repeat("x", lease.MaxTermLen+1), false},
		{"has space", false},
		{"tab\t", false},
		{"é", false},
	} {
		err := lease.ValidateTerm(tc.term)
		if tc.ok {
			assert.NoError(t, err, "%q", tc.term)
			continue
		}
		assert.ErrorIs(t, err, lease.ErrInvalid, "%q", tc.term)
		var fe *lease.FieldError
		if assert.ErrorAs(t, err, &fe) {
			assert.Equal(t, "Term", fe.Field)
		}
	}
}

func TestValidateMeta(t *testing.T) {
	many := map[string]string{}
	for i := range lease.MaxMetaEntries + 1 {
		many[strings.Repeat("k", i+1)] = "v"
	}
	for _, tc := range []struct {
		name string
		meta map[string]string
		ok   bool
	}{
		{"nil", nil, true},
		{"empty", map[string]string{}, true},
		{"typical", map[string]string{"addr": "10.0.0.7:8080", "pod": "billing-7f9c", "version": "1.4.2 (abc)"}, true},
		{"unicode value", map[string]string{"zone": "Zürich"}, true},
		{"at the byte limit", map[string]string{"k": strings.Repeat("v", lease.MaxMetaBytes-1)}, true},
		{"over the byte limit", map[string]string{"k": strings.Repeat("v", lease.MaxMetaBytes)}, false},
		{"too many entries", many, false},
		{"empty key", map[string]string{"": "v"}, false},
		{"key with a space", map[string]string{"a b": "v"}, false},
		{"key with '='", map[string]string{"a=b": "v"}, false},
		{"long key", map[string]string{strings.Repeat("k", 65): "v"}, false},
		{"control character", map[string]string{"k": "line\nbreak"}, false},
		{"invalid UTF-8", map[string]string{"k": "\xff"}, false},
	} {
		err := lease.ValidateMeta(tc.meta)
		if tc.ok {
			assert.NoError(t, err, tc.name)
		} else {
			assert.ErrorIs(t, err, lease.ErrInvalid, tc.name)
		}
	}
}
