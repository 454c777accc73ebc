package singleton

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/nats-io/nats.go"

	"github.com/asterforge/aster/actors"
)

// Response is what the leading workload's actor answers a *Request with
// (actor.Context.Respond): the reply's data, or an error sent to the caller
// as a *HandlerError.
type Response struct {
	Data []byte
	Err  error
}

// DefaultActorTimeout bounds how long Props waits for the workload actor's
// Response to one request.
const DefaultActorTimeout = 5 * time.Second

// Props returns the Props of a workload actor (for actors.WorkloadProps)
// that serves the singleton with the actor made by inner: it spawns inner
// as its child, forwards it the term's actors.Granted message, and while the
// term leads forwards every request to it as a *Request and replies with its
// Response (waiting at most DefaultActorTimeout). As with Serve, a request
// that arrives when the term is not valid is refused with
// StatusNotLeading, never forwarded. When the term ends it drains before it
// stops.
func Props(nc *nats.Conn, cfg ServeConfig, inner *actor.Props) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &server{nc: nc, cfg: cfg, inner: inner} })
}

// server is the actor Props makes.
type server struct {
	nc    *nats.Conn
	cfg   ServeConfig
	inner *actor.Props
	child *actor.PID
	done  chan struct{} // closed when Serve has returned; nil before Granted
}

func (s *server) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		s.child = c.Spawn(s.inner)
	case actors.Granted:
		c.Send(s.child, m)
		if s.done != nil {
			return
		}
		s.done = make(chan struct{})
		root, child, done := c.ActorSystem().Root, s.child, s.done
		go func() {
			defer close(done)
			_ = serve(m.Context, s.nc, s.cfg, m.Term, func(ctx context.Context, req *Request) ([]byte, error) {
				res, err := root.RequestFuture(child, req, DefaultActorTimeout).Result()
				if err != nil {
					return nil, fmt.Errorf("singleton: the workload actor did not answer: %w", err)
				}
				switch r := res.(type) {
				case Response:
					return r.Data, r.Err
				case *Response:
					return r.Data, r.Err
				default:
					return nil, errors.New("singleton: the workload actor answered with a " + fmt.Sprintf("%T", res))
				}
			})
		}()
	case *actor.Stopping:
		if s.done != nil {
			// The term's context has ended before its workload is stopped:
			// wait for the drain, which is bounded.
			t := time.NewTimer(s.cfg.drainTimeout() + time.Second)
			defer t.Stop()
			select {
			case <-s.done:
			case <-t.C:
			}
		}
	}
}
