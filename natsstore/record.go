package natsstore

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"time"

	"github.com/asterforge/aster/lease"
)

// The value stored under a lease key is one line of ASCII, so that an
// operator can read it with `nats kv get`:
//
//	aster.lease/2 <kind> <owner> <term> <token> <ttl-ms> <acquired-unix-ms> <nonce> <meta>
//
// kind is "held" for an acquisition or a renewal and "released" for the body
// of the delete marker that Release writes. owner is the instance's OwnerID
// and term the tenure's identity (lease.Claim.Term): a key held by another
// term is held, whatever its owner. token is 0 in the acquiring write (the
// token is that write's own revision, unknown before it lands) and the
// lease's token in every renewal. ttl-ms is the lease TTL in milliseconds (0
// in a release). acquired-unix-ms is the wall-clock time of the acquisition,
// for operators only: expiry is never judged by it. nonce is 16 lowercase
// hex digits, fresh for every write, so that a writer whose write timed out
// can recognise it when it reads the key back. meta is the holder's metadata
// (lease.Claim.Meta) as a URL query with its keys sorted ("addr=10.0.0.7%3A80&pod=b-7"),
// or "-" when there is none.
//
// A lease held under a session (lease.SessionStore.AcquireUnder) is written
// once, without a per-message TTL, in a held record of version 3, which adds
// the session's lease ID and term:
//
//	aster.lease/3 held <owner> <term> <token> <ttl-ms> <acquired-unix-ms> <nonce> <meta> <session-id> <session-term>
//
// Its ttl-ms is the session's TTL, for information: such a value never
// expires by itself, and is held while its session's key is held by that
// term. A version 2 reader reports it as written by a newer version and
// never treats it as free.
//
// Numbers are decimal without sign or leading zeros: every value has exactly
// one encoding, and the decoder accepts nothing else. Values written by the
// first release (aster.lease/1, without term and meta) are still read: their
// term is empty, which no claim can have, so such a key is held by someone
// else until it is released or expires. A value from a newer version
// ("aster.lease/4 ...") is reported as such and, like any value this version
// cannot read, is never treated as a free lease.

const (
	recordVersion   = "aster.lease/2"
	recordVersionV1 = "aster.lease/1"
	recordVersionV3 = "aster.lease/3" // a held record under a session
	recordPrefix    = "aster.lease/"
	// maxRecordLen bounds what the decoder looks at; a record is well under
	// it (an owner ID is at most 255 bytes, a term 64, metadata at most 512
	// bytes before escaping).
	maxRecordLen = 2048
	// noMeta stands for empty metadata.
	noMeta = "-"
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
	V1       bool // read from an aster.lease/1 value: no term, no metadata
	Kind     recordKind
	Owner    string
	Term     string        // "" only in a V1 record
	Token    uint64        // 0: this write is the acquisition; its revision is the token
	TTL      time.Duration // whole milliseconds; 0 in a release
	Acquired int64         // unix milliseconds of the acquisition; 0 if unknown
	Nonce    uint64
	Meta     map[string]string
	// Session and SessionTerm name the session a held record is held
	// under (version 3); both "" for a lease with a TTL of its own.
	Session     string
	SessionTerm string
}

// token returns the fencing token of a held record stored at revision rev.
func (r record) token(rev uint64) uint64 {
	if r.Token == 0 {
		return rev
	}
	return r.Token
}

// holder returns the lease.Holder a held record stored at revision rev
// describes.
func (r record) holder(rev uint64) lease.Holder {
	return lease.Holder{OwnerID: r.Owner, Term: r.Term, Token: lease.Token(r.token(rev)), TTL: r.TTL, Meta: r.Meta,
		Session: r.Session}
}

// appendRecord appends the encoding of r to b (aster.lease/2, /3 for a
// record under a session, or /1 for a record read from such a value).
func appendRecord(b []byte, r record) []byte {
	switch {
	case r.V1:
		b = append(b, recordVersionV1...)
	case r.Session != "":
		b = append(b, recordVersionV3...)
	default:
		b = append(b, recordVersion...)
	}
	b = append(b, ' ')
	b = append(b, r.Kind.String()...)
	b = append(b, ' ')
	b = append(b, r.Owner...)
	b = append(b, ' ')
	if !r.V1 {
		b = append(b, r.Term...)
		b = append(b, ' ')
	}
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
	b = append(b, hex[:]...)
	if r.V1 {
		return b
	}
	b = append(b, ' ')
	b = appendMeta(b, r.Meta)
	if r.Session != "" {
		b = append(b, ' ')
		b = append(b, r.Session...)
		b = append(b, ' ')
		b = append(b, r.SessionTerm...)
	}
	return b
}

// appendMeta appends meta as a URL query with sorted keys, or "-".
func appendMeta(b []byte, meta map[string]string) []byte {
	if len(meta) == 0 {
		return append(b, noMeta...)
	}
	v := make(url.Values, len(meta))
	for k, x := range meta {
		v.Set(k, x)
	}
	return append(b, v.Encode()...)
}

// parseMeta decodes the meta field written by appendMeta.
func parseMeta(b []byte) (map[string]string, error) {
	if string(b) == noMeta {
		return nil, nil
	}
	q, err := url.ParseQuery(string(b))
	if err != nil {
		return nil, fmt.Errorf("bad metadata: %v", err)
	}
	meta := make(map[string]string, len(q))
	for k, vs := range q {
		if len(vs) != 1 {
			return nil, fmt.Errorf("bad metadata: key %q appears %d times", k, len(vs))
		}
		meta[k] = vs[0]
	}
	if len(meta) == 0 {
		return nil, errors.New("bad metadata: empty")
	}
	if err := lease.ValidateMeta(meta); err != nil {
		return nil, fmt.Errorf("bad metadata: %v", err)
	}
	return meta, nil
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
	fields, err := splitRecord(&r, b)
	if err != nil {
		return r, err
	}
	if err := parseFields(&r, fields); err != nil {
		return r, err
	}
	if err := r.consistent(); err != nil {
		return r, err
	}
	// One encoding per value: leading zeros, a '+' sign or upper-case hex
	// would decode, but a value this package wrote never has them.
	if !bytes.Equal(appendRecord(make([]byte, 0, len(b)), r), b) {
		return r, errors.New("not in canonical form")
	}
	return r, nil
}

// recordVersions are the versions parseRecord reads, with their number of
// fields.
var recordVersions = [...]struct {
	version string
	fields  int
	v1      bool // no term, no metadata
}{
	{recordVersion, 9, false},
	{recordVersionV1, 7, true},
	{recordVersionV3, 11, false}, // a session's ID and term after the metadata
}

// splitRecord splits b into its fields, and decodes into r what its
// version says and the fields that versions after the first added: term,
// and a session's ID and term. The fields it returns are laid out as in /1,
// with the metadata after them unless r.V1.
func splitRecord(r *record, b []byte) ([][]byte, error) {
	fields := bytes.Split(b, []byte{' '})
	want, err := parseVersion(r, b, fields[0])
	if err != nil {
		return nil, err
	}
	if len(fields) != want {
		return nil, fmt.Errorf("%d fields, %d expected", len(fields), want)
	}
	if want == 11 {
		if err := parseSession(r, fields[9], fields[10]); err != nil {
			return nil, err
		}
		fields = fields[:9]
	}
	if !r.V1 {
		r.Term = string(fields[3])
		if err := lease.ValidateTerm(r.Term); err != nil {
			return nil, fmt.Errorf("bad term: %w", err)
		}
		fields = append(fields[:3], fields[4:]...) // the rest is laid out as in /1
	}
	return fields, nil
}

// parseVersion reads the version of b, a record whose first field is
// first, into r, and returns its number of fields.
func parseVersion(r *record, b, first []byte) (int, error) {
	for _, v := range recordVersions {
		if string(first) == v.version {
			r.V1 = v.v1
			return v.fields, nil
		}
	}
	if bytes.HasPrefix(b, []byte(recordPrefix)) {
		return 0, fmt.Errorf("%w (%q)", errNewerVersion, first)
	}
	return 0, errors.New("not an aster lease record")
}

// recordKinds are the kinds a record names.
var recordKinds = map[string]recordKind{kindHeld.String(): kindHeld, kindReleased.String(): kindReleased}

// parseFields decodes into r the fields of a record laid out as in /1
// (version, kind, owner, token, TTL, acquisition time, nonce) and the
// metadata after them unless r.V1.
func parseFields(r *record, fields [][]byte) error {
	kind, ok := recordKinds[string(fields[1])]
	if !ok {
		return fmt.Errorf("unknown kind %q", fields[1])
	}
	r.Kind = kind
	r.Owner = string(fields[2])
	if err := lease.ValidateOwnerID(r.Owner); err != nil {
		return fmt.Errorf("bad owner: %w", err)
	}
	if err := parseNumbers(r, fields[3], fields[4], fields[5], fields[6]); err != nil {
		return err
	}
	if r.V1 {
		return nil
	}
	var err error
	r.Meta, err = parseMeta(fields[7])
	return err
}

// parseNumbers decodes a record's token, TTL, acquisition time and nonce
// into r.
func parseNumbers(r *record, token, ttl, acquired, nonce []byte) error {
	var err error
	if r.Token, err = strconv.ParseUint(string(token), 10, 64); err != nil {
		return fmt.Errorf("bad token %q", token)
	}
	ms, err := strconv.ParseInt(string(ttl), 10, 64)
	if err != nil || ms < 0 || ms > math.MaxInt64/int64(time.Millisecond) {
		return fmt.Errorf("bad TTL %q", ttl)
	}
	r.TTL = time.Duration(ms) * time.Millisecond
	if r.Acquired, err = strconv.ParseInt(string(acquired), 10, 64); err != nil || r.Acquired < 0 {
		return fmt.Errorf("bad acquisition time %q", acquired)
	}
	if len(nonce) != 16 {
		return fmt.Errorf("bad nonce %q", nonce)
	}
	if r.Nonce, err = strconv.ParseUint(string(nonce), 16, 64); err != nil {
		return fmt.Errorf("bad nonce %q", nonce)
	}
	return nil
}

// consistent reports a record whose fields contradict its kind.
func (r record) consistent() error {
	switch {
	case r.Kind == kindHeld && r.TTL <= 0:
		return errors.New("held without a TTL")
	case r.Kind == kindReleased && r.TTL != 0:
		return errors.New("released with a TTL")
	case r.Kind != kindHeld && r.Session != "":
		return errors.New("a session in a " + r.Kind.String() + " record")
	}
	return nil
}

// parseSession decodes the session fields of a version 3 record into r.
func parseSession(r *record, id, term []byte) error {
	r.Session, r.SessionTerm = string(id), string(term)
	if err := lease.ValidateLeaseID(r.Session); err != nil {
		return fmt.Errorf("bad session: %w", err)
	}
	if err := lease.ValidateTerm(r.SessionTerm); err != nil {
		return fmt.Errorf("bad session term: %w", err)
	}
	return nil
}
