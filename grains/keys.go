package grains

import (
	"strings"

	"github.com/asterforge/aster/lease"
)

// Infixes of a cluster's lease IDs, after Config.Prefix.
const (
	membersInfix = ".members."
	grainInfix   = "grain."
)

// memberKey is the lease ID of a member's membership.
func memberKey(prefix, member string) string { return prefix + membersInfix + member }

// grainResource is the lock resource of an identity (the Locker's prefix,
// Config.Prefix+".", comes before it): its kind and identity, each escaped
// into one token of a lease ID.
func grainResource(kind, identity string) string {
	return grainInfix + escape(kind) + "." + escape(identity)
}

// grainKey is the lease ID of an identity's lock.
func grainKey(prefix, kind, identity string) string {
	return prefix + "." + grainResource(kind, identity)
}

// validGrainKey reports whether an identity makes a valid lease ID: its
// escaped form must fit.
func validGrainKey(prefix, kind, identity string) error {
	return lease.ValidateLeaseID(grainKey(prefix, kind, identity))
}

const hexDigits = "0123456789ABCDEF"

// escape turns s into one token of a lease ID, reversibly: letters,
// digits, '-' and '_' stay; every other byte becomes '=' and two hex
// digits. "" becomes "=", which no other string escapes to.
func escape(s string) string {
	if s == "" {
		return "="
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('=')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}
