package lease

import (
	"crypto/rand"
	"encoding/hex"
)

// OwnerIDPrefix starts every owner ID made by NewOwnerID.
const OwnerIDPrefix = "runtime-"

// NewOwnerID returns a fresh, process-unique owner ID: "runtime-" followed by
// 32 lowercase hex characters from crypto/rand.
//
// Call it once per process start, never persist it: a restarted process must
// not be mistaken for the stuck process it replaces.
func NewOwnerID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error (Go 1.24+)
	return OwnerIDPrefix + hex.EncodeToString(b[:])
}
