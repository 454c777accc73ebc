package actors

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/supervision"
)

// probe is a workload actor that records what it is told.
type probe struct {
	mu       sync.Mutex
	granted  []Granted
	stopping []error // the Hold's Token error when Stopping arrived
	// panicOnFirstGrant makes the actor fail on its first Granted.
	panicOnFirstGrant bool
}

func (p *probe) props() *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return p })
}

func (p *probe) Receive(c actor.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch m := c.Message().(type) {
	case Granted:
		p.granted = append(p.granted, m)
		if p.panicOnFirstGrant && len(p.granted) == 1 {
			panic("probe: first grant")
		}
	case *actor.Stopping:
		var err error
		if n := len(p.granted); n > 0 {
			_, err = p.granted[n-1].Term.Token()
		}
		p.stopping = append(p.stopping, err)
	}
}

func TestPropsWorkloadIsGrantedAndStoppedOnPoison(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		p := &probe{}
		cfg := r.config("node-a", WorkloadProps(p.props()), lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second})
		cfg.Restart = RestartPolicy{Backoff: supervision.Backoff{Base: time.Hour, Cap: time.Hour}}
		run := start(r.supervisor(t, cfg))
		synctest.Wait()
		acquired, _ := all[Acquired](r.rec)
		require.Len(t, acquired, 1)
		p.mu.Lock()
		require.Len(t, p.granted, 1)
		g := p.granted[0]
		p.mu.Unlock()
		assert.Equal(t, acquired[0].Token, g.Token)
		token, err := g.Term.Token()
		require.NoError(t, err)
		assert.Equal(t, g.Token, token)

		r.faults.LoseRenewals(1)
		time.Sleep(3 * time.Second)
		p.mu.Lock()
		require.Len(t, p.stopping, 1, "the actor was stopped")
		assert.ErrorIs(t, p.stopping[0], lease.ErrLost, "token reads already failed when it was stopped")
		p.mu.Unlock()
		assert.ErrorIs(t, context.Cause(g.Context), lease.ErrLost)
		require.NoError(t, run.stop())
	})
}

func TestPropsWorkloadFailureEndsTheTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		p := &probe{panicOnFirstGrant: true}
		cfg := r.config("node-a", WorkloadProps(p.props()), lease.Config{TTL: 10 * time.Second})
		cfg.Restart = RestartPolicy{Backoff: supervision.Backoff{Base: time.Second, Cap: time.Second}}
		run := start(r.supervisor(t, cfg))
		time.Sleep(5 * time.Second)
		require.NoError(t, run.stop())
		exited, _ := all[WorkloadExited](r.rec)
		require.Len(t, exited, 1)
		assert.ErrorContains(t, exited[0].Err, "probe: first grant")
		assert.Equal(t, 2, count[Released](r.rec), "released after the failure and at shutdown")
		assert.Equal(t, 2, count[Acquired](r.rec), "led again after the backoff")
		p.mu.Lock()
		assert.Len(t, p.granted, 2)
		p.mu.Unlock()
	})
}

func TestTreeWorkload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		var mu sync.Mutex
		var tokens []lease.Token
		var causes []error
		build := func(g Granted) (*supervision.Tree, error) {
			return supervision.New(supervision.Spec{
				Name: "outbox",
				Children: []supervision.ChildSpec{{
					Name: "dispatcher",
					Func: func(ctx context.Context) error {
						token, err := g.Term.Token()
						if err != nil {
							return err
						}
						mu.Lock()
						tokens = append(tokens, token)
						mu.Unlock()
						<-ctx.Done()
						mu.Lock()
						causes = append(causes, context.Cause(g.Context))
						mu.Unlock()
						return nil
					},
				}},
			}, supervision.Options{})
		}
		cfg := r.config("node-a", WorkloadTree(build), lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second})
		cfg.Restart = RestartPolicy{Backoff: supervision.Backoff{Base: time.Second, Cap: time.Second}}
		run := start(r.supervisor(t, cfg))
		synctest.Wait()
		// Lost at 2 s; the old term's key, which no other term may take,
		// expires at 10 s; leading again right after.
		r.faults.LoseRenewals(1)
		time.Sleep(13 * time.Second)
		require.NoError(t, run.stop())

		acquired, _ := all[Acquired](r.rec)
		require.Len(t, acquired, 2)
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, []lease.Token{acquired[0].Token, acquired[1].Token}, tokens, "a fresh tree per term, with its token")
		require.Len(t, causes, 2)
		assert.ErrorIs(t, causes[0], lease.ErrLost)
		assert.ErrorIs(t, causes[1], supervision.ErrShutdown)
		assert.Equal(t, 1, count[Released](r.rec))
	})
}

func TestTreeWorkloadBuildErrorEndsTheTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		bad := errors.New("no config")
		cfg := r.config("node-a", WorkloadTree(func(Granted) (*supervision.Tree, error) { return nil, bad }),
			lease.Config{TTL: 10 * time.Second})
		cfg.Restart = RestartPolicy{Backoff: supervision.Backoff{Base: time.Second, Cap: time.Second}, Intensity: 1}
		err := r.supervisor(t, cfg).Run(t.Context())
		require.ErrorIs(t, err, ErrTooManyRestarts)
		require.ErrorIs(t, err, bad)
	})
}

func TestSupervisorAsChildReleasesWhenItsParentStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		w := &counter{}
		s := r.supervisor(t, r.config("node-a", w.workload(), lease.Config{TTL: 10 * time.Second}))
		tree, err := supervision.New(supervision.Spec{
			Name:     "app",
			Children: []supervision.ChildSpec{{Name: "singleton", Props: s.Props()}},
		}, supervision.Options{})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- tree.Run(ctx) }()
		time.Sleep(time.Minute)
		require.Equal(t, "node-a", r.holder())
		cancel()
		require.NoError(t, <-done)
		assert.Empty(t, r.holder(), "released when the tree shut down")
		assert.ErrorIs(t, w.lastCause(), supervision.ErrShutdown)
		assert.Equal(t, 1, count[Released](r.rec))
	})
}

func TestSupervisorConfigValidation(t *testing.T) {
	store := struct{ lease.Store }{}
	ok := SupervisorConfig{Lease: lease.Config{LeaseID: "x", OwnerID: "o"}, Store: store,
		Workload: WorkloadFunc(func(context.Context, lease.Token) error { return nil })}
	_, err := NewLeaseSupervisor(ok)
	require.NoError(t, err)
	for name, mut := range map[string]func(*SupervisorConfig){
		"no lease id":   func(c *SupervisorConfig) { c.Lease.LeaseID = "" },
		"no store":      func(c *SupervisorConfig) { c.Store = nil },
		"no workload":   func(c *SupervisorConfig) { c.Workload = nil },
		"nil func":      func(c *SupervisorConfig) { c.Workload = WorkloadFunc(nil) },
		"nil props":     func(c *SupervisorConfig) { c.Workload = WorkloadProps(nil) },
		"nil tree":      func(c *SupervisorConfig) { c.Workload = WorkloadTree(nil) },
		"bad backoff":   func(c *SupervisorConfig) { c.Restart.Backoff.Base, c.Restart.Backoff.Cap = time.Minute, time.Second },
		"bad period":    func(c *SupervisorConfig) { c.Restart.Period = -time.Second },
		"bad meta":      func(c *SupervisorConfig) { c.Meta = map[string]string{"a b": "c"} },
		"margin >= ttl": func(c *SupervisorConfig) { c.Lease.TTL, c.Lease.SafetyMargin = time.Second, time.Second },
	} {
		c := ok
		mut(&c)
		_, err := NewLeaseSupervisor(c)
		assert.ErrorIs(t, err, lease.ErrInvalid, name)
	}
}
