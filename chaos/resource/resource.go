// Package resource is the fenced resource of the chaos suite: a lease.Fence
// per lease, served over HTTP on loopback by the test process, that records
// every write offered to it, accepted or rejected, with its token, holder
// and times.
//
// It lives in the test process, not beside nats-server, so that it outlives
// every fault the suite injects into the store and the holders.
package resource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/asterforge/aster/chaos/record"
	"github.com/asterforge/aster/lease"
)

// Resource is a lease.Fence per lease that records every write offered to
// it. It is safe for concurrent use.
type Resource struct {
	now func() int64

	mu      sync.Mutex
	fences  map[string]*lease.Fence
	applied map[[2]string]bool // lease and request ID of every request applied
	writes  []record.Write
}

// New returns an empty resource that stamps decisions with now (a reading
// of the reference clock, such as record.Now).
func New(now func() int64) *Resource {
	return &Resource{now: now, fences: map[string]*lease.Fence{}, applied: map[[2]string]bool{}}
}

// Server is a fenced resource served over HTTP.
type Server struct {
	*Resource
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// Start serves a new resource on 127.0.0.1, on a port the kernel picks.
func Start() (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{Resource: New(record.Now), ln: ln, done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /write", s.handleWrite)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// URL is the base URL holders pass to NewClient.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Write offers w (Lease, Proc, Owner, Term, Token, Request, Sent) to the
// resource, and returns it decided: Accepted, Highest, At and Seq filled in.
func (s *Resource) Write(w record.Write) record.Write {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.fences[w.Lease]
	if f == nil {
		f = &lease.Fence{}
		s.fences[w.Lease] = f
	}
	w.Highest = uint64(f.Stats().Highest.Token)
	w.Accepted = f.Admit(lease.Tenure{Token: lease.Token(w.Token), Term: w.Term}) == nil
	if key := [2]string{w.Lease, w.Request}; w.Accepted && w.Request != "" {
		w.Duplicate = s.applied[key] // the request ID is recorded with the effect
		s.applied[key] = true
	}
	w.At = s.now()
	w.Seq = uint64(len(s.writes) + 1)
	s.writes = append(s.writes, w)
	return w
}

// Writes returns every write offered so far, in the order decided.
func (s *Resource) Writes() []record.Write {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]record.Write(nil), s.writes...)
}

// Last returns the last accepted write of leaseID, and false if none was.
func (s *Resource) Last(leaseID string) (record.Write, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.writes) - 1; i >= 0; i-- {
		if w := s.writes[i]; w.Accepted && w.Lease == leaseID {
			return w, true
		}
	}
	return record.Write{}, false
}

// Close stops serving and waits for the server's goroutine. Writes stays
// readable.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, s.srv.Close())
	}
	<-s.done
	return err
}

func (s *Server) handleWrite(rw http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	token, err1 := strconv.ParseUint(q.Get("token"), 10, 64)
	sent, err2 := strconv.ParseInt(q.Get("sent"), 10, 64)
	if err := errors.Join(err1, err2); err != nil || q.Get("lease") == "" {
		http.Error(rw, fmt.Sprintf("bad write: %v", err), http.StatusBadRequest)
		return
	}
	w := s.Write(record.Write{Lease: q.Get("lease"), Proc: q.Get("proc"), Owner: q.Get("owner"), Term: q.Get("term"),
		Token: token, Request: q.Get("request"), Sent: sent})
	if !w.Accepted {
		http.Error(rw, fmt.Sprintf("stale token %d < %d", w.Token, w.Highest), http.StatusConflict)
		return
	}
	if w.Duplicate {
		_, _ = io.WriteString(rw, "applied before\n") // done: the caller's request has its effect
		return
	}
	_, _ = io.WriteString(rw, "accepted\n")
}

// ErrStale is returned by Client.Write when the resource rejected the token.
var ErrStale = errors.New("resource: stale token")

// Client writes to a resource from a holder process.
type Client struct {
	base string
	hc   *http.Client
}

// NewClient returns a client of the resource at base (Server.URL).
func NewClient(base string) *Client {
	return &Client{base: base, hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
}

// Offer is a write a holder offers to the resource.
type Offer struct {
	Lease, Proc, Owner string
	Tenure             lease.Tenure // the token and term the fence judges
	Request            string       // the singleton request the write applies, if any
}

// Write offers o to the resource. It returns nil when the write was
// accepted, ErrStale when it was rejected, and another error when the
// answer did not come.
func (c *Client) Write(ctx context.Context, o Offer) error {
	q := url.Values{
		"lease": {o.Lease}, "proc": {o.Proc}, "owner": {o.Owner}, "term": {o.Tenure.Term},
		"token": {strconv.FormatUint(uint64(o.Tenure.Token), 10)}, "sent": {strconv.FormatInt(record.Now(), 10)},
	}
	if o.Request != "" {
		q.Set("request", o.Request)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/write?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	switch resp.StatusCode {
	case http.StatusOK:
		return nil
	case http.StatusConflict:
		return ErrStale
	default:
		return fmt.Errorf("resource: %s", resp.Status)
	}
}

// Close releases the client's idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }
