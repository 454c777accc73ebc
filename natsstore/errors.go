package natsstore

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/asterforge/aster/lease"
)

// Errors reported when a Store is opened, and by operations when the
// server refuses this connection's credentials or permissions. Operations
// report the errors of package lease (ErrLost, ErrInvalid, ErrUnavailable,
// ErrCorrupt, ErrClosed), wrapping the NATS error for detail.
//
// Three classes of failure tell an operator what to do:
//
//   - Configuration: a setting of this program is wrong, and retrying
//     cannot help: a missing or unreadable credentials, CA, certificate or
//     key file; a server that requires a client certificate when none is
//     configured, or whose certificate no configured CA signed; an account
//     that requires a bucket size limit (Config.MaxBytes). These are
//     *lease.FieldError values, matching lease.ErrInvalid, that name the
//     field to change and say how.
//   - Authentication and permission: the server refuses the credentials
//     (ErrAuthentication) or a subject (ErrPermission). They are judged
//     from the failing operation only: a permissions violation the
//     connection reported earlier, for another subject or already blamed
//     on another failure, never turns a later timeout into ErrPermission.
//     During operations both also match lease.ErrUnavailable: the store
//     keeps reconnecting, and a renewal is retried until its deadline.
//   - Transient: lease.ErrUnavailable (and the context's error when it
//     ended): the server is away or slow; retrying may succeed.
var (
	// ErrBucketConfig reports a bucket whose configuration would break
	// leases (see Config); the wrapping error says what is wrong and how to
	// fix it. The bucket is never changed.
	ErrBucketConfig = errors.New("natsstore: bucket configuration is unsafe for leases")

	// ErrNoBucket reports that the bucket does not exist and Config.NoCreate
	// forbids creating it.
	ErrNoBucket = errors.New("natsstore: bucket not found")

	// ErrPermission reports that the server denied this connection's user a
	// subject the store needs (the bucket's $KV subjects, the JetStream API,
	// or reply inboxes). Fix the user's permissions; docs/nats.md lists
	// them for each topology.
	ErrPermission = errors.New("natsstore: permission denied")

	// ErrAuthentication reports that the server refused the credentials:
	// wrong, expired or revoked. Dial returns it when the first connection
	// is refused; afterwards operations return it (with
	// lease.ErrUnavailable) while the connection made by Dial is down and
	// its reconnect attempts are refused. Replace the credentials file: the
	// next attempt reads it.
	ErrAuthentication = errors.New("natsstore: authentication failed")
)

// CorruptError reports a value under a lease key that is not a lease this
// package wrote: garbage, a foreign value, or a value from a newer version.
// It matches lease.ErrCorrupt with errors.Is. The key is never treated as
// free while it holds such a value; an operator must delete it, after which
// contenders wait the bucket's MaxTTL before taking the lease (see
// Store.Acquire): the store's error says so.
type CorruptError struct {
	Bucket   string
	Key      string
	Revision uint64
	Reason   string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("natsstore: key %q in bucket %q at revision %d is not an aster lease: %s",
		e.Key, e.Bucket, e.Revision, e.Reason)
}

// Is reports whether target is lease.ErrCorrupt.
func (e *CorruptError) Is(target error) bool { return target == lease.ErrCorrupt }

// isConflict reports whether err is JetStream's answer to a failed
// compare-and-swap: wrong last sequence, code 10071 (10164 on replicated
// streams). A raw publish error is not wrapped in jetstream.ErrKeyExists.
func isConflict(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}

// unavailable translates an error of the transport into one that matches
// lease.ErrUnavailable and, when ctx is done, ctx.Err().
func unavailable(ctx context.Context, what string, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("natsstore: %s: %w: %w (%v)", what, lease.ErrUnavailable, cerr, err)
	}
	return fmt.Errorf("natsstore: %s: %w: %w", what, lease.ErrUnavailable, err)
}

// permissionDenied returns an ErrPermission error when err, or the
// connection's last asynchronous error, is a permissions violation. Opening
// a store uses it; operations use writes.fail, which is stricter.
func permissionDenied(nc *nats.Conn, err error) error {
	perm := err
	if !errors.Is(perm, nats.ErrPermissionViolation) {
		if nc == nil {
			return nil
		}
		perm = nc.LastError()
		if perm == nil || !errors.Is(perm, nats.ErrPermissionViolation) {
			return nil
		}
	}
	return fmt.Errorf("%w: %v", ErrPermission, perm)
}

// authMessages are the server's refusals of credentials, lower case, as
// nats.go reports them (it does not always wrap its sentinels).
var authMessages = []string{
	"authorization violation",
	"user authentication expired",
	"user authentication revoked",
	"account authentication expired",
}

// isAuthFailure reports whether err is one of the server's refusals of the
// credentials.
func isAuthFailure(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) ||
		errors.Is(err, nats.ErrAuthRevoked) || errors.Is(err, nats.ErrAccountAuthExpired) {
		return true
	}
	msg := strings.ToLower(err.Error())
	for _, m := range authMessages {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// violation is a permissions violation the server reported, parsed from
// nats.go's error: `Permissions Violation for Publish to "SUBJECT"`,
// `... for Subscription to "SUBJECT"` (maybe followed by a queue group), or
// `... for Publish with Reply of "SUBJECT"`.
type violation struct {
	subscribe bool // a subscription was denied
	reply     bool // a publish with this reply subject was denied
	subject   string
}

var violationRe = regexp.MustCompile(`(?i)permissions violation for (publish to|subscription to|publish with reply of) "([^"]*)"`)

// parseViolation returns the violation err reports, if it is one.
func parseViolation(err error) (violation, bool) {
	if err == nil || !errors.Is(err, nats.ErrPermissionViolation) {
		return violation{}, false
	}
	m := violationRe.FindStringSubmatch(err.Error())
	if m == nil {
		return violation{}, false
	}
	kind := strings.ToLower(m[1])
	return violation{subscribe: kind == "subscription to", reply: kind == "publish with reply of", subject: m[2]}, true
}

// fail translates the error of a failed operation into a lease error,
// judging from this operation only:
//
//   - ErrAuthentication (with lease.ErrUnavailable) when the connection is
//     down now because the server refuses its credentials;
//   - ErrPermission (with lease.ErrUnavailable) when err is a permissions
//     violation, or when the connection's last error is a violation of a
//     subject operations use (a key's subject, the stream's message get,
//     a watch's consumer creation, the reply inbox) that no earlier
//     failure was blamed on: the server drops a request it does not
//     permit, so the operation saw only a timeout. A violation of another
//     subject (a watch's CONSUMER.DELETE, say) is never blamed;
//   - otherwise lease.ErrUnavailable, and ctx.Err() when ctx is done.
//
// err itself is always wrapped, so that errors.Is still finds
// context.DeadlineExceeded and the NATS error in it.
func (w *writes) fail(ctx context.Context, what string, err error) error {
	if w.nc == nil {
		return unavailable(ctx, what, err)
	}
	if st := w.nc.Status(); st != nats.CONNECTED {
		if refused := w.refusal(); refused != nil {
			return fmt.Errorf("natsstore: %s: %w: %w: %w (not connected to NATS: %s; the server refuses the credentials: %v)",
				what, ErrAuthentication, lease.ErrUnavailable, err, st, refused)
		}
		what += " (not connected to NATS: " + st.String() + ")"
	}
	if errors.Is(err, ErrPermission) {
		// Seen during the operation (failFast, dropped): the connection's last
		// error is that violation; it must not be blamed again.
		w.blame(w.nc.LastError())
		return fmt.Errorf("natsstore: %s: %w: %w", what, lease.ErrUnavailable, err)
	}
	if v, ok := parseViolation(err); ok {
		return fmt.Errorf("natsstore: %s: %w: %w: %w (%s)", what, ErrPermission, lease.ErrUnavailable, err, v.fix())
	}
	if perm := w.nc.LastError(); w.blame(perm) {
		v, _ := parseViolation(perm)
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = fmt.Errorf("%w (%w)", cerr, err)
		}
		return fmt.Errorf("natsstore: %s: %w: %w: %w (the server refused this operation: %v; %s)",
			what, ErrPermission, lease.ErrUnavailable, err, perm, v.fix())
	}
	return unavailable(ctx, what, err)
}

// dropped returns err, a write's failure, as an ErrPermission error when
// the connection's last error says the server refused the publish to
// subject and no earlier failure was blamed on that refusal. The server
// drops a publish it does not permit and tells only the connection, so the
// write saw a timeout; but its outcome is known (nothing was stored), and
// the caller must neither read back nor write again as if it might have
// landed.
func (w *writes) dropped(subject string, err error) error {
	if w.nc == nil {
		return err
	}
	perm := w.nc.LastError()
	v, ok := parseViolation(perm)
	if !ok || v.subscribe || v.reply || v.subject != subject || !w.blame(perm) {
		return err
	}
	return fmt.Errorf("%w: %w (the server refused this write: %v; %s)", ErrPermission, err, perm, v.fix())
}

func (v violation) fix() string {
	switch {
	case v.subscribe:
		return fmt.Sprintf("allow the user to subscribe to %q", v.subject)
	case v.reply:
		return fmt.Sprintf("allow the user to receive replies on %q", v.subject)
	}
	return fmt.Sprintf("allow the user to publish to %q", v.subject)
}

// refusal returns why the connection's reconnect attempts are refused, or
// nil when they are not (or it is connected).
func (w *writes) refusal() error {
	if c := w.cfg.conn; c != nil {
		if err := c.refusal(); err != nil {
			return err
		}
	}
	// Without Dial's handlers (NewConn, New): nats.go keeps the last
	// attempt's error while it reconnects, and clears it on success.
	if err := w.nc.LastError(); isAuthFailure(err) {
		return err
	}
	return nil
}

// blame reports whether perm, the connection's last error, explains the
// failure of an operation now: it is a permissions violation of a subject
// operations use, and (for a connection made by Dial, which keeps count) no
// earlier failure was blamed on this publish violation. A denied
// subscription stays denied until the connection reconnects, so it explains
// every failure until then.
func (w *writes) blame(perm error) bool {
	v, ok := parseViolation(perm)
	if !ok || !w.usesSubject(v) {
		return false
	}
	if v.subscribe || w.cfg.conn == nil {
		return true
	}
	return w.cfg.conn.blameOnce(perm)
}

// usesSubject reports whether operations (Acquire, Renew, Release, Watch)
// use the subject of v.
func (w *writes) usesSubject(v violation) bool {
	if v.subscribe || v.reply {
		return strings.HasPrefix(v.subject, inboxPrefix(w.nc)+".")
	}
	if strings.HasPrefix(v.subject, w.putPrefix) {
		return true
	}
	if b, ok := w.kv.(*jsBucket); ok {
		if v.subject == b.msgGet {
			return true
		}
		create := strings.TrimSuffix(b.msgGet, "STREAM.MSG.GET.KV_"+w.bucket) + "CONSUMER.CREATE.KV_" + w.bucket
		return v.subject == create || strings.HasPrefix(v.subject, create+".")
	}
	return false
}

// inboxPrefix returns the connection's inbox prefix, without the dot.
func inboxPrefix(nc *nats.Conn) string {
	if p := nc.Opts.InboxPrefix; p != "" {
		return p
	}
	return nats.InboxPrefix[:len(nats.InboxPrefix)-1]
}

// connState is what Dial's handlers learn about its connection, shared
// with the Store through Config.conn.
type connState struct {
	log     *slog.Logger
	onEvent func(Event)

	// certRequested is set when a server asked for a client certificate
	// and none was configured, during the current connection attempt.
	certRequested atomic.Bool

	mu       sync.Mutex
	refused  error  // the last refusal of the credentials since the connection was up
	refusals int    // how many
	server   string // the server last connected to
	blamed   error  // the last publish violation blamed on a failure
}

func newConnState(cfg Config) *connState {
	return &connState{log: cfg.logger(), onEvent: cfg.OnEvent}
}

func (c *connState) emit(ev Event) {
	if c.onEvent != nil {
		c.onEvent(ev)
	}
}

// refusal returns the current refusal of the credentials, if any.
func (c *connState) refusal() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refused
}

// blameOnce reports whether perm was not blamed on a failure yet, and
// records that it now is.
func (c *connState) blameOnce(perm error) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.blamed == perm {
		return false
	}
	c.blamed = perm
	return true
}

// asyncError is the connection's error handler: it logs what the server
// reported, and turns refusals of the credentials into events.
func (c *connState) asyncError(_ *nats.Conn, sub *nats.Subscription, err error) {
	switch {
	case sessionEnded(err):
		// The server ends a live connection whose JWT expires or is
		// revoked. The reconnect reads the credentials file again: if it
		// was replaced in time, nothing is refused.
		c.log.Warn("natsstore: the NATS server ended the connection: its credentials expired or were revoked; "+
			"reconnecting with the credentials file as it is now", "err", err)
	case isAuthFailure(err):
		c.mu.Lock()
		c.refused = err
		c.refusals++
		refusals, server := c.refusals, c.server
		c.mu.Unlock()
		if refusals == 1 {
			c.log.Error("natsstore: the NATS server refuses this connection's credentials; reconnecting, "+
				"and reading the credentials file again at every attempt: replace it", "err", err, "server", server)
			c.emit(AuthenticationFailed{Server: server, Reason: err.Error()})
		} else {
			c.log.Debug("natsstore: credentials refused again", "err", err, "attempts", refusals)
		}
	case hintRefusal(err):
		// A watch that is down follows its keys' writes if the user may
		// (watch_hint.go); nothing else uses the subscription.
		c.log.Debug("natsstore: subscription to a key's subject refused", "err", err)
	case directRefusal(err):
		// Only while reads wait for a meta leader (write_direct.go).
		c.log.Debug("natsstore: direct get refused", "err", err)
	default:
		subject := ""
		if sub != nil {
			subject = sub.Subject
		}
		c.log.Warn("natsstore: asynchronous NATS error", "err", err, "subject", subject)
	}
}

// sessionEnded reports whether err is the server ending a live connection
// because its credentials expired or were revoked (a connection attempt
// with such credentials is refused with an authorization violation).
func sessionEnded(err error) bool {
	if errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked) || errors.Is(err, nats.ErrAccountAuthExpired) {
		return true
	}
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "authentication expired") || strings.Contains(msg, "authentication revoked")
}

// connected records Dial's first connection.
func (c *connState) connected(nc *nats.Conn) {
	server := nc.ConnectedUrlRedacted()
	c.mu.Lock()
	c.server = server
	c.mu.Unlock()
	c.log.Debug("natsstore: connected to NATS", "url", server)
}

// reconnected records a reconnection, ending a refusal of the credentials.
func (c *connState) reconnected(nc *nats.Conn) {
	server := nc.ConnectedUrlRedacted()
	c.mu.Lock()
	refusals := c.refusals
	c.refused, c.refusals = nil, 0
	if server != "" {
		c.server = server
	}
	c.mu.Unlock()
	switch {
	case refusals > 0:
		c.log.Info("natsstore: reconnected to NATS: the credentials are accepted again", "url", server,
			"refused_attempts", refusals)
		c.emit(AuthenticationRecovered{Server: server, Refusals: refusals})
	default:
		c.log.Info("natsstore: reconnected to NATS", "url", server)
	}
}

// connectError classifies the failure of a connection attempt of Dial: a
// *lease.FieldError for a configuration the server will never accept,
// ErrAuthentication for refused credentials, lease.ErrUnavailable
// otherwise.
func connectError(urls string, certRequested bool, err error) error {
	bad := func(field, format string, args ...any) error {
		return &lease.FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	var (
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
	)
	switch {
	case isAuthFailure(err):
		return fmt.Errorf("%w: connect to %s: %w (check the user and password, token, nkey or credentials file; "+
			"a JWT may have expired or been revoked)", ErrAuthentication, urls, err)
	case certRequested:
		// With TLS 1.3 the client finishes its handshake before the server
		// checks for a certificate: the refusal shows up later, as a broken
		// pipe, an EOF or a TLS alert.
		return bad("CertFile", "the server at %s requires a client certificate (mutual TLS) and none is configured: "+
			"set CertFile and KeyFile, or TLS.Certificates (connecting failed with: %v)", urls, err)
	case errors.As(err, &unknownCA):
		return bad("CAFile", "the certificate of the server at %s is not signed by a CA this client trusts: "+
			"set CAFile to the CA that signed it (%v)", urls, err)
	case errors.As(err, &hostname):
		return bad("TLS", "the certificate of the server at %s is not valid for the host connected to: "+
			"connect with a name the certificate holds, or set TLS.ServerName (%v)", urls, err)
	case errors.As(err, &invalid):
		return bad("TLS", "the certificate of the server at %s is not valid (%v)", urls, err)
	case errors.Is(err, nats.ErrSecureConnWanted):
		return bad("TLS", "TLS is configured (TLS, CAFile or CertFile) but the server at %s does not offer it (%v)", urls, err)
	}
	return fmt.Errorf("natsstore: connect to %s: %w: %w", urls, lease.ErrUnavailable, err)
}

// jsErrMaxBytesRequired is the JetStream API error of a stream created
// without a size limit in an account with max_bytes_required.
const jsErrMaxBytesRequired = 10113

// jsErrStreamStoreFailed is the JetStream API error "error creating store
// for stream".
const jsErrStreamStoreFailed = 10049

// openError adds what an error of opening a store means for its
// configuration: an account that requires a bucket size limit is a
// *lease.FieldError for Config.MaxBytes.
func openError(cfg Config, err error) error {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrMaxBytesRequired {
		return &lease.FieldError{Field: "MaxBytes", Reason: fmt.Sprintf("the account requires a size limit on every "+
			"stream (max_bytes_required), and bucket %q does not exist: set Config.MaxBytes (a lease takes "+
			"about 200 bytes; 16 MiB holds tens of thousands), or create the bucket with one (%v)", cfg.bucket(), err)}
	}
	return err
}
