package singleton

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"

	"github.com/asterforge/aster/lease"
)

// DefaultSubjectPrefix starts the subject of a lease's singleton:
// "aster.singleton.<lease ID>".
const DefaultSubjectPrefix = "aster.singleton"

// Subject returns the subject on which the singleton of leaseID is served
// with the default prefix.
func Subject(leaseID string) string { return DefaultSubjectPrefix + "." + leaseID }

// Headers of requests and replies.
const (
	// HeaderRequestID carries the request's ID, the same on every re-send.
	HeaderRequestID = "Aster-Request-Id"
	// HeaderStatus carries the reply's Status.
	HeaderStatus = "Aster-Status"
	// HeaderToken and HeaderTerm name the tenure that answered.
	HeaderToken = "Aster-Token"
	HeaderTerm  = "Aster-Term"
	// HeaderError carries a handler's error message.
	HeaderError = "Aster-Error"
)

// Status is the outcome a leader reports in a reply.
type Status string

const (
	// StatusOK: the request was handled; the reply's data is the handler's.
	StatusOK Status = "ok"
	// StatusNotLeading: the term that received the request was not valid
	// when it would have handled it (its validity had passed, or it was
	// stepping down). The request was not handled; the Client sends it to
	// the next leader.
	StatusNotLeading Status = "not-leading"
	// StatusError: the handler returned an error. It is not retried.
	StatusError Status = "error"
)

// Errors reported by a Client.
var (
	// ErrNoLeader is wrapped by the error of a Request whose context ended
	// while no leader answered.
	ErrNoLeader = errors.New("singleton: no leader answered")
	// ErrBufferFull reports a request refused (OverflowReject) or dropped
	// (OverflowDropOldest) because MaxPending requests were already
	// waiting for a leader.
	ErrBufferFull = errors.New("singleton: too many requests waiting for a leader")
	// ErrClosed reports a request on a closed Client.
	ErrClosed = errors.New("singleton: client closed")
	// ErrNoTerm reports Serve called with a context that belongs to no
	// lease term (use it inside a LeaseSupervisor's workload).
	ErrNoTerm = errors.New("singleton: the context belongs to no lease term")
)

// HandlerError is a handler's error as the caller sees it. The request was
// handled (by the tenure named) and is not retried.
type HandlerError struct {
	Message string
	Tenure  lease.Tenure
}

func (e *HandlerError) Error() string {
	return fmt.Sprintf("singleton: the leader (token %d) failed the request: %s", e.Tenure.Token, e.Message)
}

// newRequestID returns a random request ID: 32 lowercase hex characters.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// replyHeader is the header of a reply with status s from tenure t.
func replyHeader(s Status, t lease.Tenure) nats.Header {
	h := nats.Header{HeaderStatus: []string{string(s)}}
	if t.Token != 0 {
		h.Set(HeaderToken, strconv.FormatUint(uint64(t.Token), 10))
		h.Set(HeaderTerm, t.Term)
	}
	return h
}

// tenureOf reads the tenure named in a reply.
func tenureOf(h nats.Header) lease.Tenure {
	tok, _ := strconv.ParseUint(h.Get(HeaderToken), 10, 64)
	return lease.Tenure{Token: lease.Token(tok), Term: h.Get(HeaderTerm)}
}
