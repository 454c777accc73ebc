package singleton

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/lease"
)

// Request is one request as the leader's handler sees it.
type Request struct {
	// ID is the caller's request ID, the same on every re-send of one
	// request: check it to apply a request once (see Dedupe).
	ID   string
	Data []byte
	// Header is the request's NATS header, with this package's own
	// headers.
	Header nats.Header
	// Tenure is the term handling the request. Its token was checked on the
	// clock right before the handler was called: give it to every fenced
	// write the handler makes.
	Tenure lease.Tenure
}

// Handler handles one request on the leader and returns the reply's data.
// An error is sent to the caller as a *HandlerError and is not retried,
// unless ctx had ended: ctx ends when the term's lease is lost or its
// validity passes (not when the term steps down or shuts down, so that the
// requests already taken are answered), and a request cut short that way is
// refused with StatusNotLeading and sent again by the caller.
type Handler func(ctx context.Context, req *Request) ([]byte, error)

// ServeConfig says how Serve serves a lease's singleton.
type ServeConfig struct {
	// Subject is where requests arrive. "" means Subject(LeaseID of the
	// term), "aster.singleton.<lease ID>".
	Subject string
	// Concurrency is the number of requests handled at once. 0 means 1:
	// requests are handled one at a time, in the order they arrive, which
	// is what a sequencer needs.
	Concurrency int
	// DrainTimeout bounds the drain when the term ends: requests already
	// received are answered (those that arrive after the term stopped being
	// valid are refused with StatusNotLeading). 0 means 5 s. Keep it within
	// the lease's StopTimeout, or the term is reported stuck.
	DrainTimeout time.Duration
	// Logger receives a record for each refused request. nil discards.
	Logger *slog.Logger
}

// Serve serves h on the singleton's subject while, and only while, the term
// that ctx belongs to leads. Call it from a LeaseSupervisor's workload:
//
//	actors.WorkloadFunc(func(ctx context.Context, _ lease.Token) error {
//		return singleton.Serve(ctx, nc, singleton.ServeConfig{}, handle)
//	})
//
// It subscribes at once, handles each request with the term's token checked
// on the clock (a request that arrives when the term is no longer valid is
// refused with StatusNotLeading, never handled), and when ctx ends it drains
// the subscription (the requests already received are answered or refused)
// and returns nil, or an error if the subscription failed. It returns
// ErrNoTerm when ctx belongs to no lease term.
func Serve(ctx context.Context, nc *nats.Conn, cfg ServeConfig, h Handler) error {
	term, ok := actors.TermFrom(ctx)
	if !ok {
		return ErrNoTerm
	}
	return serve(ctx, nc, cfg, term, h)
}

func serve(ctx context.Context, nc *nats.Conn, cfg ServeConfig, term actors.Term, h Handler) error {
	if h == nil {
		return &lease.FieldError{Field: "Handler", Reason: "must not be nil"}
	}
	subject := cfg.Subject
	if subject == "" {
		subject = Subject(term.LeaseID())
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	workers := max(cfg.Concurrency, 1)
	drain := cfg.drainTimeout()

	var (
		wg   sync.WaitGroup
		busy atomic.Int64 // requests being handled
	)
	slots := make(chan struct{}, workers)
	handle := func(m *nats.Msg) {
		busy.Add(1)
		defer busy.Add(-1)
		tenure, err := term.Tenure() // on the clock, right before handling
		if err != nil {
			log.Debug("singleton: refused a request: the term is not valid", "subject", subject, "error", err)
			respond(m, replyHeader(StatusNotLeading, lease.Tenure{}), nil)
			return
		}
		req := &Request{ID: m.Header.Get(HeaderRequestID), Data: m.Data, Header: m.Header, Tenure: tenure}
		hctx, cancel := handlerContext(ctx, term)
		data, herr := callHandler(h, hctx, req)
		ended := hctx.Err() != nil
		cancel()
		switch {
		case herr != nil && ended:
			// The term was lost, or its validity passed, while the handler
			// ran: the request may or may not have been applied. The caller
			// sends it again, with its ID.
			log.Debug("singleton: a request was cut short by the end of the term", "subject", subject, "error", herr)
			respond(m, replyHeader(StatusNotLeading, tenure), nil)
		case herr != nil:
			hdr := replyHeader(StatusError, tenure)
			hdr.Set(HeaderError, herr.Error())
			respond(m, hdr, nil)
		default:
			respond(m, replyHeader(StatusOK, tenure), data)
		}
	}
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		if workers == 1 {
			handle(m) // in order, on the subscription's goroutine
			return
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			handle(m)
		})
	})
	if err != nil {
		return fmt.Errorf("singleton: subscribe to %s: %w", subject, err)
	}
	// The subscription is registered at the server once the connection has
	// flushed it: before that, a request would find no responder.
	if err := nc.FlushTimeout(drain); err != nil && ctx.Err() == nil {
		_ = sub.Unsubscribe()
		return fmt.Errorf("singleton: subscribe to %s: %w", subject, err)
	}
	<-ctx.Done()

	// Drain: the server stops delivering, and every request it delivered
	// before is answered. nats.go's own drain polls every 100 ms; this
	// waits only as long as the requests take: once a flush has returned,
	// everything the server delivered before the unsubscribe has arrived,
	// and the drain is over when each of those has been handled.
	//
	// The term's token fails from the moment the term ends, so a request
	// handled during the drain is refused (StatusNotLeading) and its caller
	// sends it to the next leader at once; one the drain missed would only
	// make its caller wait for its attempt's timeout.
	deadline := time.Now().Add(drain)
	if err := sub.Drain(); err == nil {
		_ = nc.FlushTimeout(drain)
		idle := 0 // checks in a row that found nothing to do
		for idle < 2 {
			pending, _, _ := sub.Pending()
			if pending > 0 || busy.Load() > 0 {
				idle = 0
			} else {
				idle++
			}
			if !time.Now().Before(deadline) {
				log.Warn("singleton: drain did not end in time; pending requests are dropped", "subject", subject,
					"timeout", drain)
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	_ = sub.Unsubscribe()
	wg.Wait()
	return nil
}

// handlerContext is the context a handler runs under: it ends when the
// term's lease is lost or its validity passes, but not when the term ends on
// purpose (a step down, a shutdown), so that the requests already taken are
// answered while the lease, which is released only once Serve has returned,
// is still this term's. It keeps term's values.
func handlerContext(term context.Context, t actors.Term) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithDeadline(context.WithoutCancel(term), t.ValidUntil())
	stop := context.AfterFunc(term, func() {
		var lost *lease.LostError
		if errors.As(t.Err(), &lost) {
			cancel()
		}
	})
	return ctx, func() { stop(); cancel() }
}

func (c ServeConfig) drainTimeout() time.Duration {
	if c.DrainTimeout <= 0 {
		return 5 * time.Second
	}
	return c.DrainTimeout
}

// callHandler runs h, turning a panic into an error.
func callHandler(h Handler, ctx context.Context, req *Request) (data []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("singleton: handler panicked: %v", r)
		}
	}()
	return h(ctx, req)
}

// respond sends a reply, if the request asked for one.
func respond(m *nats.Msg, h nats.Header, data []byte) {
	if m.Reply == "" {
		return
	}
	_ = m.RespondMsg(&nats.Msg{Header: h, Data: data})
}
