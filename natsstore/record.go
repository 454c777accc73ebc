package natsstore

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/asterforge/aster/lease"
)

// The value stored under a lease key is one line of ASCII, so that an
// operator can read it with `nats kv get`:
//
//	aster.lease/1 <kind> <owner> <token> <ttl-ms> <acquired-unix-ms> <nonce>
//
// kind is "held" for an acquisition or a renewal and "released" for the body
// of the delete marker that Release writes. token is 0 in the acquiring
// write (the token is that write's own revision, unknown before it lands)
// and the lease's token in every renewal. ttl-ms is the lease TTL in
// milliseconds (0 in a release). acquired-unix-ms is the wall-clock time of
// the acquisition, for operators only: expiry is never judged by it. nonce
// is 16 lowercase hex digits, fresh for every write, so that a writer whose
// write timed out can recognise it when it reads the key back.
//
// Numbers are decimal without sign or leading zeros: every value has exactly
// one encoding, and the decoder accepts nothing else. A value from a newer
// version ("aster.lease/2 ...") is reported as such and, like any value this
// version cannot read, is never treated as a free lease.

const (
	recordVersion = "aster.lease/1"
	recordPrefix  = "aster.lease/"
	// maxRecordLen bounds what the decoder looks at; a record is well under
	// it (an owner ID is at most 255 bytes).
	maxRecordLen = 512
)

type recordKind uint8

const (
	kindUnknown  recordKind = iota // never encoded; the safe zero value
	kindHeld                       // an acquisition or a renewal
	kindReleased                   // the body of Release's delete marker
)

func (k recordKind) String() string {
	switch k {
	case kindHeld:
		return "held"
	case kindReleased:
		return "released"
	default:
		return "unknown"
	}
}

// record is a decoded lease value.
type record struct {
	Kind     recordKind
	Owner    string
	Token    uint64        // 0: this write is the acquisition; its revision is the token
	TTL      time.Duration // whole milliseconds; 0 in a release
	Acquired int64         // unix milliseconds of the acquisition; 0 if unknown
	Nonce    uint64
}

// token returns the fencing token of a held record stored at revision rev.
func (r record) token(rev uint64) uint64 {
	if r.Token == 0 {
		return rev
	}
	return r.Token
}

// appendRecord appends the encoding of r to b.
func appendRecord(b []byte, r record) []byte {
	b = append(b, recordVersion...)
	b = append(b, ' ')
	b = append(b, r.Kind.String()...)
	b = append(b, ' ')
	b = append(b, r.Owner...)
	b = append(b, ' ')
	b = strconv.AppendUint(b, r.Token, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, r.TTL.Milliseconds(), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, r.Acquired, 10)
	b = append(b, ' ')
	var hex [16]byte
	const digits = "0123456789abcdef"
	for i := range hex {
		hex[i] = digits[(r.Nonce>>(60-4*i))&0xf]
	}
	return append(b, hex[:]...)
}

// errNewerVersion marks a record written by a newer version of this package.
var errNewerVersion = errors.New("written by a newer version")

// parseRecord decodes a lease value. It never panics; every error it returns
// describes what is wrong in a few words.
func parseRecord(b []byte) (record, error) {
	var r record
	if len(b) > maxRecordLen {
		return r, fmt.Errorf("%d bytes long, at most %d expected", len(b), maxRecordLen)
	}
	fields := bytes.Split(b, []byte{' '})
	if len(fields) == 0 || !bytes.Equal(fields[0], []byte(recordVersion)) {
		if bytes.HasPrefix(b, []byte(recordPrefix)) {
			return r, fmt.Errorf("%w (%q)", errNewerVersion, fields[0])
		}
		return r, errors.New("not an aster lease record")
	}
	if len(fields) != 7 {
		return r, fmt.Errorf("%d fields, 7 expected", len(fields))
	}
	switch string(fields[1]) {
	case "held":
		r.Kind = kindHeld
	case "released":
		r.Kind = kindReleased
	default:
		return r, fmt.Errorf("unknown kind %q", fields[1])
	}
	r.Owner = string(fields[2])
	if err := lease.ValidateOwnerID(r.Owner); err != nil {
		return r, fmt.Errorf("bad owner: %w", err)
	}
	var err error
	if r.Token, err = strconv.ParseUint(string(fields[3]), 10, 64); err != nil {
		return r, fmt.Errorf("bad token %q", fields[3])
	}
	ttl, err := strconv.ParseInt(string(fields[4]), 10, 64)
	if err != nil || ttl < 0 || ttl > math.MaxInt64/int64(time.Millisecond) {
		return r, fmt.Errorf("bad TTL %q", fields[4])
	}
	r.TTL = time.Duration(ttl) * time.Millisecond
	if r.Acquired, err = strconv.ParseInt(string(fields[5]), 10, 64); err != nil || r.Acquired < 0 {
		return r, fmt.Errorf("bad acquisition time %q", fields[5])
	}
	if len(fields[6]) != 16 {
		return r, fmt.Errorf("bad nonce %q", fields[6])
	}
	if r.Nonce, err = strconv.ParseUint(string(fields[6]), 16, 64); err != nil {
		return r, fmt.Errorf("bad nonce %q", fields[6])
	}
	switch {
	case r.Kind == kindHeld && r.TTL <= 0:
		return r, errors.New("held without a TTL")
	case r.Kind == kindReleased && r.TTL != 0:
		return r, errors.New("released with a TTL")
	}
	// One encoding per value: leading zeros, a '+' sign or upper-case hex
	// would decode, but a value this package wrote never has them.
	if !bytes.Equal(appendRecord(make([]byte, 0, len(b)), r), b) {
		return r, errors.New("not in canonical form")
	}
	return r, nil
}
