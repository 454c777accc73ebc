package lease

import (
	"crypto/rand"
	"encoding/hex"
	"unicode"
	"unicode/utf8"
)

// Limits of term identities and metadata.
const (
	// MaxTermLen bounds a term identity.
	MaxTermLen = 64
	// MaxMetaEntries bounds the entries of Claim.Meta.
	MaxMetaEntries = 16
	// MaxMetaBytes bounds the bytes of Claim.Meta's keys and values
	// together, so that a lease value stays small.
	MaxMetaBytes = 512
	// maxMetaKeyLen bounds one metadata key.
	maxMetaKeyLen = 64
)

// NewTerm returns a fresh term identity: 24 lowercase hex characters (96
// bits) from crypto/rand. Draw one for every tenure (every acquisition a
// supervisor starts, every lock guard) and never reuse it for another: a
// store tells terms apart by it, not by their OwnerID.
func NewTerm() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// ValidateTerm reports whether term can identify a tenure: non-empty, at
// most MaxTermLen bytes, printable ASCII without spaces.
func ValidateTerm(term string) error {
	switch {
	case term == "":
		return invalid("Term", "must not be empty (use lease.NewTerm)")
	case len(term) > MaxTermLen:
		return invalid("Term", "is %d bytes long, at most %d allowed", len(term), MaxTermLen)
	}
	for i := 0; i < len(term); i++ {
		if term[i] <= ' ' || term[i] > '~' {
			return invalid("Term", "%q: only printable ASCII without spaces is allowed", term)
		}
	}
	return nil
}

// ValidateMeta reports whether meta fits in a lease value: at most
// MaxMetaEntries entries and MaxMetaBytes bytes of keys and values; keys of
// 1 to 64 letters, digits, '-', '_' or '.'; values valid UTF-8 without
// control characters. nil and empty maps are valid.
func ValidateMeta(meta map[string]string) error {
	if len(meta) > MaxMetaEntries {
		return invalid("Meta", "has %d entries, at most %d allowed", len(meta), MaxMetaEntries)
	}
	size := 0
	for k, v := range meta {
		size += len(k) + len(v)
		if err := validateMetaKey(k); err != nil {
			return err
		}
		if err := validateMetaValue(k, v); err != nil {
			return err
		}
	}
	if size > MaxMetaBytes {
		return invalid("Meta", "holds %d bytes of keys and values, at most %d allowed", size, MaxMetaBytes)
	}
	return nil
}

// validateMetaKey checks one key of ValidateMeta.
func validateMetaKey(k string) error {
	if k == "" || len(k) > maxMetaKeyLen {
		return invalid("Meta", "key %q must be 1 to %d bytes long", k, maxMetaKeyLen)
	}
	for i := 0; i < len(k); i++ {
		if !isMetaKeyByte(k[i]) {
			return invalid("Meta", "key %q: only letters, digits, '-', '_' and '.' are allowed", k)
		}
	}
	return nil
}

// isMetaKeyByte reports whether c may appear in a metadata key.
func isMetaKeyByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.'
}

// validateMetaValue checks the value of key k of ValidateMeta.
func validateMetaValue(k, v string) error {
	if !utf8.ValidString(v) {
		return invalid("Meta", "the value of %q is not valid UTF-8", k)
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return invalid("Meta", "the value of %q contains a control character", k)
		}
	}
	return nil
}
