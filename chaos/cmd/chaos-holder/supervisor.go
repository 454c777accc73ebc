package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/chaos/record"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/supervision"
)

// errRestart is how the trigger child asks its tree to restart the lease
// supervisor (restart mode).
var errRestart = errors.New("chaos-holder: restart requested (SIGUSR2)")

// supervisor builds a LeaseSupervisor candidate named sup, with the
// workload of the holder's mode, and returns the function that runs it.
func (e *env) supervisor(ctx context.Context, sup string) (func(context.Context) error, error) {
	o := e.o
	owner := o.owner
	if owner == "" {
		owner = lease.NewOwnerID()
	}
	cfg := lease.Config{
		LeaseID: o.leaseID, OwnerID: owner, TTL: o.ttl,
		RenewInterval: o.renew, StandbyRetryInterval: o.standby,
	}
	var w actors.Workload
	switch o.mode {
	case "tree":
		w = actors.WorkloadTree(func(g actors.Granted) (*supervision.Tree, error) {
			return supervision.New(supervision.Spec{Name: "work", Children: []supervision.ChildSpec{{
				Name: "writer", Shutdown: o.shutdown, Restart: supervision.Transient,
				Func: func(ctx context.Context) error { return e.work(ctx, sup, owner, g.Term) },
			}}}, supervision.Options{})
		})
	case "singleton":
		var err error
		if w, err = e.singleton(ctx, sup, owner); err != nil {
			return nil, err
		}
	default:
		w = actors.WorkloadFunc(func(ctx context.Context, _ lease.Token) error {
			term, _ := actors.TermFrom(ctx)
			return e.work(ctx, sup, owner, term)
		})
	}
	ls, err := actors.NewLeaseSupervisor(actors.SupervisorConfig{
		Lease:    cfg,
		Store:    record.NewStore(e.store, e.log, o.proc, cfg, nil),
		Workload: w,
		Restart: actors.RestartPolicy{Backoff: supervision.Backoff{Base: 5 * time.Millisecond, Cap: 50 * time.Millisecond},
			Intensity: supervision.Unlimited},
		OnEvent: func(ev actors.Event) {
			switch ev.(type) {
			case actors.WorkloadStopTimeout, actors.StuckWorkloadStopped, actors.GaveUp:
				fmt.Printf("%s: event %T %+v\n", sup, ev, ev)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		done := make(chan struct{})
		resigned := make(chan struct{})
		go func() {
			defer close(resigned)
			e.resignOnSignal(ctx, done, sup, ls)
		}()
		defer func() { close(done); <-resigned }()
		var err error
		if o.mode == "restart" {
			err = e.restartable(ctx, ls)
		} else {
			err = ls.Run(ctx)
		}
		if err != nil {
			return fmt.Errorf("%s (%s): %w", sup, owner, err)
		}
		return nil
	}, nil
}

// resignOnSignal makes ls resign at each SIGUSR1, until ctx or done ends.
func (e *env) resignOnSignal(ctx context.Context, done <-chan struct{}, sup string, ls *actors.LeaseSupervisor) {
	for {
		resign, _ := e.signals()
		select {
		case <-ctx.Done():
			return
		case <-done:
			return
		case <-resign:
		}
		rctx, cancel := context.WithTimeout(ctx, 3*e.o.ttl)
		err := ls.Resign(rctx, e.o.resignHold)
		cancel()
		fmt.Printf("%s: resign: %v\n", sup, err)
	}
}

// restartable runs ls as a child of a supervision tree (one for all) with
// a sibling that fails at each SIGUSR2: the tree then stops ls's actor
// (its workload is stopped, with a bounded wait) and starts a new one from
// the same Props, as a parent supervisor restarts a failed subtree.
func (e *env) restartable(ctx context.Context, ls *actors.LeaseSupervisor) error {
	tree, err := supervision.New(supervision.Spec{
		Name: "app", Strategy: supervision.OneForAll, Intensity: 1000, Period: time.Second,
		Children: []supervision.ChildSpec{
			{Name: "lease", Props: ls.Props(), Shutdown: 4 * e.o.ttl, Backoff: supervision.Backoff{Immediate: true}},
			{Name: "trigger", Backoff: supervision.Backoff{Immediate: true}, Func: func(ctx context.Context) error {
				_, restart := e.signals()
				select {
				case <-ctx.Done():
					return nil
				case <-restart:
					return errRestart
				}
			}},
		},
	}, supervision.Options{})
	if err != nil {
		return err
	}
	return tree.Run(ctx)
}
