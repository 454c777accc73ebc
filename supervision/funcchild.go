package supervision

import (
	"context"
	"runtime/debug"

	"github.com/asynkron/protoactor-go/actor"
)

// funcActor runs a ChildSpec.Func in a goroutine: the goroutine starts
// while the actor processes Started, and the actor waits for it to return
// while it processes Stopping, after cancelling its context with cause
// ErrShutdown. A goroutine that ignores its context keeps the actor from
// stopping; its supervisor then reports the child as not stopped.
type funcActor struct {
	fn     func(context.Context) error
	cancel context.CancelCauseFunc
	done   chan struct{}
}

// funcReturned is sent by the goroutine to its actor when fn returns.
type funcReturned struct{ err error }

func funcProps(fn func(context.Context) error) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &funcActor{fn: fn} })
}

func (f *funcActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		f.start(ctx)
	case funcReturned:
		switch m.err.(type) {
		case nil:
			ctx.Stop(ctx.Self()) // a normal exit
		case *PanicError:
			escalate(ctx, m.err)
		default:
			escalate(ctx, &exitError{m.err})
		}
	case *actor.Stopping, *actor.Restarting:
		f.stop()
	}
}

func (f *funcActor) start(ctx actor.Context) {
	// Tell the supervisor (the parent link) at once that this child has
	// started, before fn can fail: an immediate error is then a failure of
	// a started child, never a start failure.
	if parent := ctx.Parent(); parent != nil {
		ctx.Send(parent, &actor.Touched{Who: ctx.Self()})
	}
	runCtx, cancel := context.WithCancelCause(context.Background())
	f.cancel, f.done = cancel, make(chan struct{})
	self, root := ctx.Self(), ctx.ActorSystem().Root
	go func() {
		defer close(f.done)
		err := runFunc(runCtx, f.fn)
		if runCtx.Err() == nil {
			root.Send(self, funcReturned{err})
		}
	}()
}

func (f *funcActor) stop() {
	if f.cancel == nil {
		return
	}
	f.cancel(ErrShutdown)
	<-f.done
	f.cancel = nil
}

// runFunc calls fn, turning a panic into a *PanicError with its stack.
func runFunc(ctx context.Context, fn func(context.Context) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return fn(ctx)
}

// escalate reports reason to the parent of the actor behind ctx.
func escalate(ctx actor.Context, reason any) {
	if e, ok := ctx.(escalator); ok {
		e.EscalateFailure(reason, nil)
		return
	}
	panic(reason)
}
