package grains

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/ctxext"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lock"
)

// Activation is what a grain may read of its activation: the fencing token
// of the lock that makes it the only activation of its identity, whether
// that lock is still valid, and a context cancelled when it is lost. It
// never ends or releases the lock: the Member does, when the grain stops.
//
// Read it in the grain with ActivationOf, and pass Token (or Tenure) with
// every write to a shared resource, which applies lease.Fence's rule.
type Activation struct {
	g    *lock.Guard
	kind string
	id   string
}

var activationExt = ctxext.NextContextExtensionID()

// ExtensionID makes an Activation an actor context extension.
func (a *Activation) ExtensionID() ctxext.ContextExtensionID { return activationExt }

// ActivationOf returns the Activation of the grain whose context ctx is,
// and false for an actor that is not a grain activated by a Member.
func ActivationOf(ctx actor.ExtensionContext) (*Activation, bool) {
	a, ok := ctx.Get(activationExt).(*Activation)
	return a, ok && a != nil
}

// Kind and Identity name the grain.
func (a *Activation) Kind() string     { return a.kind }
func (a *Activation) Identity() string { return a.id }

// Token returns the activation's fencing token while its lock is valid, and
// an error matching lease.ErrLost (or lease.ErrReleased once it stopped)
// after. Read it before every fenced write.
func (a *Activation) Token() (lease.Token, error) { return a.g.Token() }

// Tenure returns the token and the term, as lease.Fence takes them, while
// the lock is valid.
func (a *Activation) Tenure() (lease.Tenure, error) {
	if _, err := a.g.Token(); err != nil {
		return lease.Tenure{}, err
	}
	return a.g.Tenure(), nil
}

// Context is cancelled, with the cause, when the activation's lock is lost
// or released.
func (a *Activation) Context() context.Context { return a.g.Context() }

// Lost is closed when the activation's lock is lost or released.
func (a *Activation) Lost() <-chan struct{} { return a.g.Lost() }

// Remaining is the validity left.
func (a *Activation) Remaining() time.Duration { return a.g.Remaining() }

// Member is the ID of the member the activation runs on.
func (a *Activation) Member() string { return a.g.OwnerID() }

// Fenced reads the token and runs write through f, as lock.Guard.Fenced
// does: the write runs only if the lock is valid and f admits the tenure.
func (a *Activation) Fenced(f *lease.Fence, write func(lease.Token) error) error {
	return a.g.Fenced(f, write)
}

// lifecycle reports whether msg is one of the actor's own lifecycle
// messages, which reach a grain whatever its lock says.
func lifecycle(msg any) bool {
	switch msg.(type) {
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting, *cluster.ClusterInit:
		return true
	}
	return false
}

// gate is the receiver middleware of every activation: a message reaches
// the grain only while the activation's lock is valid when the grain
// starts handling it (Token succeeds). Otherwise the sender, if any, is
// answered with a dead letter, so that a caller looks the identity up
// again at once instead of waiting for its timeout. This is the one place
// that decides whether an activation may act.
func gate(a *Activation) actor.ReceiverMiddleware {
	return func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			if lifecycle(env.Message) {
				next(c, env)
				return
			}
			if _, err := a.g.Token(); err != nil {
				if env.Sender != nil {
					c.ActorSystem().Root.Send(env.Sender, &actor.DeadLetterResponse{Target: c.Self()})
				}
				return
			}
			next(c, env)
		}
	}
}

// activationProps returns the Props of one activation: the kind's, with
// the cluster identity and the Activation in its context, behind the gate.
func activationProps(props *actor.Props, ci *cluster.ClusterIdentity, a *Activation) *actor.Props {
	return props.Clone(
		actor.WithOnInit(func(ctx actor.Context) {
			cluster.SetClusterIdentity(ctx, ci)
			ctx.Set(a)
		}),
		actor.WithReceiverMiddleware(gate(a)),
	)
}

func (a *Activation) String() string { return fmt.Sprintf("%s/%s@%s", a.kind, a.id, a.g.OwnerID()) }
