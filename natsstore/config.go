package natsstore

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"time"

	"github.com/asterforge/aster/lease"
)

// Defaults applied when a Config or DialOptions field is zero.
const (
	// DefaultBucket is the KV bucket used when Config.Bucket is empty.
	DefaultBucket = "aster_leases"
	// DefaultTimeout bounds an operation whose context has no deadline.
	DefaultTimeout = 5 * time.Second
	// DefaultMarkerTTL is the LimitMarkerTTL of a bucket the store creates,
	// and the TTL of the marker Release leaves: how long a watcher that
	// reconnects can still see that a key was released or expired.
	DefaultMarkerTTL = time.Minute
	// DefaultCloseTimeout bounds Close.
	DefaultCloseTimeout = 5 * time.Second
	// DefaultReconnectWait is the pause between reconnect attempts of a
	// connection made by Dial.
	DefaultReconnectWait = 250 * time.Millisecond
	// DefaultConnectTimeout bounds one connection attempt of Dial.
	DefaultConnectTimeout = 2 * time.Second
	// DefaultRetryConnectCap is the longest pause between two attempts of
	// Dial to make its first connection when DialOptions.RetryConnect is
	// set: the pause starts at ReconnectWait and doubles up to it.
	DefaultRetryConnectCap = 5 * time.Second
	// DefaultMaxTTL is the longest lease TTL of a bucket the store
	// creates, and the one it assumes for a bucket that records none.
	DefaultMaxTTL = 2 * time.Minute
	// DefaultWatchCheckInterval is how often a watch checks that it is
	// alive.
	DefaultWatchCheckInterval = 2 * time.Second
	// DefaultIsolationTimeout is how long the requests of a store whose
	// connection Dial made may fail before it leaves a server cut off from
	// the cluster (Config.IsolationTimeout), when its leases' TTLs do not
	// make that shorter.
	DefaultIsolationTimeout = 2 * time.Second
)

// ExpiryMode says who decides that a lease has expired.
type ExpiryMode uint8

const (
	// ExpiryAuto (the zero value) uses per-message TTLs when the server
	// (2.11 or later) and the bucket (LimitMarkerTTL set) support them, and
	// falls back to ExpiryObserved otherwise, logging a warning.
	ExpiryAuto ExpiryMode = iota
	// ExpiryServer requires per-message TTLs: the server deletes a lease
	// that was not renewed within its TTL plus Config.ExpiryGrace and tells
	// watchers. A contender judges the lease expired before that, once it
	// has seen the key unchanged for the lease's TTL, as in ExpiryObserved
	// mode: the grace lets a holder whose renewals a store outage held up
	// (a stream electing a leader) renew its lease when the store is back,
	// and keep its term and token. Opening a bucket or server without
	// per-message TTLs fails with ErrBucketConfig.
	ExpiryServer
	// ExpiryObserved writes leases without a TTL; a contender judges that a
	// lease expired when it has seen the same revision of the key, unchanged,
	// for the lease's TTL on its own monotonic clock (the method of
	// Kubernetes leader election). Watchers see releases but not expiries.
	ExpiryObserved
)

func (m ExpiryMode) String() string {
	switch m {
	case ExpiryAuto:
		return "auto"
	case ExpiryServer:
		return "server"
	case ExpiryObserved:
		return "observed"
	default:
		return fmt.Sprintf("ExpiryMode(%d)", uint8(m))
	}
}

// Config configures a Store. The zero value works: it binds to, or creates,
// the bucket "aster_leases" with one replica. Config is taken by value and
// never modified.
type Config struct {
	// Bucket is the KV bucket that holds the leases. "" means
	// DefaultBucket.
	Bucket string

	// Replicas is the number of replicas of a bucket the store creates (1,
	// 3 or 5 in a cluster). 0 means 1. An existing bucket keeps its own.
	Replicas int

	// NoCreate makes opening fail with ErrNoBucket instead of creating a
	// missing bucket.
	NoCreate bool

	// MarkerTTL is the LimitMarkerTTL of a bucket the store creates and the
	// TTL of release markers, rounded up to whole seconds. 0 means
	// DefaultMarkerTTL.
	MarkerTTL time.Duration

	// Expiry says who judges expiry; the zero value detects it.
	Expiry ExpiryMode

	// ExpiryGrace is how long past a lease's TTL the server keeps an
	// unrenewed lease in ExpiryServer mode, rounded up to whole seconds.
	// Contenders do not wait for it: they take a lease once they have seen
	// its key unchanged for its TTL, and they start counting again when
	// the store failed them meanwhile (an outage holds every renewal up).
	// Within the grace, a holder that could not renew through an outage
	// renews when the store is back, keeping its term (see
	// actors.Acquired.Resumed); a lease whose holder and contenders all
	// stopped is deleted by the server at the end of the grace. 0 means
	// one TTL (the server keeps a lease for twice its TTL); negative means
	// none (the server deletes a lease at its TTL, and an outage that
	// outlasts the TTL since the last renewal costs a handover).
	ExpiryGrace time.Duration

	// MaxTTL is the longest lease TTL the bucket allows, rounded up to
	// whole seconds. A store that creates the bucket records it in the
	// bucket (stream metadata); every store refuses longer TTLs, and takes a
	// key that vanished without a release (deleted or purged by hand) only
	// this long after it saw it vanish, since the key's holder may act
	// until its TTL runs out. Set it where the bucket is created; a store
	// that binds to a bucket uses the bucket's value, and refuses to open
	// with a larger MaxTTL. 0 means the bucket's value, or DefaultMaxTTL for
	// a bucket the store creates or one that records none.
	MaxTTL time.Duration

	// Timeout bounds every operation whose context has no deadline. 0
	// means DefaultTimeout.
	Timeout time.Duration

	// CloseTimeout bounds Close. 0 means DefaultCloseTimeout.
	CloseTimeout time.Duration

	// Domain or APIPrefix select a JetStream domain or API prefix when the
	// store builds its JetStream context from a connection (NewConn, Dial).
	// At most one may be set. New uses the JetStream context it is given.
	Domain    string
	APIPrefix string

	// Logger receives the store's few log records (a degraded bucket, a
	// reconnect, a key changed behind an owner's back). nil discards them.
	Logger *slog.Logger

	// OnEvent, when not nil, receives every Event the store reports, on
	// the store's goroutines. It must not block.
	OnEvent func(Event)

	// MaxBytes is the size limit of a bucket the store creates, in bytes.
	// 0 means none. An account with max_bytes_required (a JetStream limit
	// of the account) refuses to create a bucket without one; opening then
	// fails with a *lease.FieldError for MaxBytes. A full bucket never
	// drops held keys, but refuses every write that needs more room (new
	// keys, a first renewal, a release) with lease.ErrUnavailable: leave
	// ample room (a lease takes about 200 bytes). An existing bucket keeps
	// its own limit.
	MaxBytes int64

	// WatchCheckInterval is how often each watch checks that it is alive:
	// it reads the key's last revision (one small request to the stream
	// leader) and re-creates a watch that has not delivered it within half
	// an interval (WatchStalled). A watch's consumer also sends an idle
	// heartbeat every half interval, and a watch that receives nothing for
	// an interval is re-created too. 0 means DefaultWatchCheckInterval;
	// negative disables both checks (heartbeats then come every 5 s, and
	// only the server uses them).
	WatchCheckInterval time.Duration

	// IsolationTimeout is how long the store's requests may fail, or go
	// unanswered from their send time, while connected before, when the
	// bucket's stream is out of reach through this server and the
	// connection knows other servers, it reconnects to another one
	// (nats.Conn.ForceReconnect; ServerIsolated): a server cut off from its
	// cluster keeps its clients. The timeout in effect is the smaller of
	// this and a sixth of the shortest lease TTL the store wrote within two
	// of its TTLs (at least 100 ms; 500 ms at TTL 3 s), so that a holder
	// leaves such a server and renews through another before its renew
	// deadline. It asks for the bucket's stream information once they have
	// failed for a quarter of the timeout in effect, and again every
	// quarter while they fail; an answer from a stream leader cut off from
	// its replicas moves it then, no answer or no leader only after the
	// whole timeout in effect. 0 means
	// DefaultIsolationTimeout for a connection made by Dial, and never for a
	// connection given to NewConn or New, whose other users a forced
	// reconnect would disturb: set it to opt in. Negative disables it.
	IsolationTimeout time.Duration

	// conn is what the store knows about its connection: credential
	// refusals (Dial's connections), and which permissions violations were
	// already blamed on a failure (see writes.fail).
	conn *connState
}

// DialOptions says how Dial connects. The zero value connects to
// nats://127.0.0.1:4222 without authentication.
//
// The connection Dial makes fails fast while disconnected (nothing is
// buffered for replay after a reconnect, so an operation that failed did
// not land later) and reconnects forever, also when the server refuses its
// credentials (an expired or revoked JWT): files named here are read again
// at every connection attempt, so that a replaced credentials file,
// client certificate or CA file is used from the next reconnect on.
type DialOptions struct {
	// URLs are the servers to connect to. Empty means
	// nats://127.0.0.1:4222.
	URLs []string

	// Name names the connection in the server's monitoring.
	Name string

	// CredentialsFile is a NATS .creds file (user JWT and nkey seed). It is
	// read at every connection attempt: replace it (atomically, by renaming
	// a new file over it) to rotate the credentials.
	CredentialsFile string
	// NKeySeedFile is a file holding a user nkey seed ("SU..."). Its public
	// key is read once, by Dial: rotating it takes a new Dial.
	NKeySeedFile string
	// User and Password authenticate with a user name and password.
	User, Password string
	// Token authenticates with a token.
	Token string

	// TLS configures TLS; it is cloned, never modified. When it is set,
	// or CAFile or CertFile is, the connection requires TLS; otherwise it
	// uses TLS when the server requires it.
	TLS *tls.Config
	// CAFile holds PEM certificates of the CAs that may sign the server's
	// certificate. They are added to TLS.RootCAs; without TLS.RootCAs they
	// are the only CAs trusted (not the system's).
	CAFile string
	// CertFile and KeyFile hold the client certificate and its key (PEM),
	// for servers that verify clients (mTLS). They replace
	// TLS.Certificates.
	CertFile string
	KeyFile  string

	// InboxPrefix replaces "_INBOX" as the prefix of the subjects on which
	// this connection receives replies and watch deliveries. A user whose
	// subscribe permissions allow only a prefix of its own (such as
	// "_INBOX_B.>") needs it; so does a user reaching JetStream in another
	// account through an API prefix, which must import the deliveries on
	// that prefix (see docs/nats.md). "" means "_INBOX".
	InboxPrefix string

	// RetryConnect makes Dial retry its first connection, with a backoff
	// from ReconnectWait up to DefaultRetryConnectCap, until it succeeds
	// or ctx ends, so that a service may start before its NATS server
	// (or before its account or credentials are in place). Unreachable
	// servers and refused credentials are retried (each failed attempt is
	// logged); configuration errors (lease.ErrInvalid) are not. Without
	// it, Dial fails at the first refusal.
	RetryConnect bool

	// ReconnectWait is the pause between reconnect attempts. 0 means
	// DefaultReconnectWait.
	ReconnectWait time.Duration
	// ConnectTimeout bounds one connection attempt. 0 means
	// DefaultConnectTimeout.
	ConnectTimeout time.Duration
}

// bucketName is the JetStream KV bucket name grammar.
var bucketName = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

func (c Config) bucket() string {
	if c.Bucket == "" {
		return DefaultBucket
	}
	return c.Bucket
}

func (c Config) replicas() int {
	if c.Replicas == 0 {
		return 1
	}
	return c.Replicas
}

func (c Config) markerTTL() time.Duration {
	if c.MarkerTTL <= 0 {
		return DefaultMarkerTTL
	}
	return roundUpSecond(c.MarkerTTL)
}

// serverTTL returns the per-message TTL of a held value in ExpiryServer
// mode: the lease TTL and the grace, each rounded up to whole seconds.
func (c Config) serverTTL(ttl time.Duration) time.Duration {
	ttl = roundUpSecond(ttl)
	switch {
	case c.ExpiryGrace < 0:
		return ttl
	case c.ExpiryGrace == 0:
		return satAdd(ttl, ttl)
	default:
		return satAdd(ttl, roundUpSecond(c.ExpiryGrace))
	}
}

// satAdd returns a+b for non-negative durations, saturating instead of
// overflowing.
func satAdd(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// maxTTL returns the MaxTTL of a bucket the store creates.
func (c Config) maxTTL() time.Duration {
	if c.MaxTTL == 0 {
		return DefaultMaxTTL
	}
	return roundUpSecond(c.MaxTTL)
}

func (c Config) timeout() time.Duration {
	if c.Timeout <= 0 {
		return DefaultTimeout
	}
	return c.Timeout
}

func (c Config) closeTimeout() time.Duration {
	if c.CloseTimeout <= 0 {
		return DefaultCloseTimeout
	}
	return c.CloseTimeout
}

func (c Config) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}

// validate reports the first problem with c as a *lease.FieldError.
func (c Config) validate() error {
	return firstBroken(
		fieldRule{!bucketName.MatchString(c.bucket()), "Bucket",
			"%q: only letters, digits, - and _ are allowed", []any{c.Bucket}},
		fieldRule{c.Replicas < 0 || c.Replicas > 5, "Replicas",
			"must be between 1 and 5, got %d", []any{c.Replicas}},
		fieldRule{c.MarkerTTL < 0, "MarkerTTL",
			"must not be negative, got %v", []any{c.MarkerTTL}},
		fieldRule{c.MaxTTL < 0 || c.MaxTTL > 0 && c.MaxTTL < minTTL, "MaxTTL",
			"must be 0 (the bucket's) or at least %v, got %v", []any{minTTL, c.MaxTTL}},
		fieldRule{c.Expiry > ExpiryObserved, "Expiry",
			"unknown mode %d", []any{c.Expiry}},
		fieldRule{c.Timeout < 0, "Timeout",
			"must not be negative, got %v", []any{c.Timeout}},
		fieldRule{c.CloseTimeout < 0, "CloseTimeout",
			"must not be negative, got %v", []any{c.CloseTimeout}},
		fieldRule{c.WatchCheckInterval > 0 && c.WatchCheckInterval < minWatchCheckInterval, "WatchCheckInterval",
			"must be at least %v, got %v", []any{minWatchCheckInterval, c.WatchCheckInterval}},
		fieldRule{c.IsolationTimeout > 0 && c.IsolationTimeout < minIsolationTimeout, "IsolationTimeout",
			"must be at least %v, got %v", []any{minIsolationTimeout, c.IsolationTimeout}},
		fieldRule{c.Domain != "" && c.APIPrefix != "", "Domain",
			"set Domain or APIPrefix, not both", nil},
		fieldRule{c.MaxBytes < 0, "MaxBytes",
			"must not be negative (0 means no limit), got %d", []any{c.MaxBytes}},
	)
}

// fieldRule is one line of a validation table: field is wrong when broken,
// for the reason format says with args.
type fieldRule struct {
	broken bool
	field  string
	format string
	args   []any
}

// firstBroken returns the first of rules that is broken as a
// *lease.FieldError, nil when none is.
func firstBroken(rules ...fieldRule) error {
	for _, r := range rules {
		if r.broken {
			return fieldErrorf(r.field, r.format, r.args...)
		}
	}
	return nil
}

// fieldErrorf returns a *lease.FieldError for field, its reason formatted
// as fmt.Sprintf does.
func fieldErrorf(field, format string, args ...any) error {
	return &lease.FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// roundUpSecond rounds d up to whole seconds: NATS per-message TTLs are whole
// seconds, and a 1.5 s TTL would act as 1 s.
// It saturates instead of overflowing.
func roundUpSecond(d time.Duration) time.Duration {
	const maxWhole = math.MaxInt64 / time.Second * time.Second
	if d > maxWhole {
		return maxWhole
	}
	if r := d % time.Second; r != 0 {
		return d - r + time.Second
	}
	return d
}
