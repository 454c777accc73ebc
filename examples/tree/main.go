// Command tree shows a declarative supervision tree at work: a flaky
// payments worker restarted with exponential backoff, its dependent
// restarted with it (rest-for-one), a cache pair restarted together after a
// panic (one-for-all), temporary and transient children, snapshots of the
// tree while it heals and once it has healed, and finally a tree that
// cannot heal exceeding its restart intensity and escalating. It exits by
// itself in about two seconds, with a verdict: PASS when every tree did
// what its strategy promises, FAIL (exit status 1) naming what did not.
//
//	go run ./examples/tree
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lmittmann/tint"

	"github.com/asterforge/aster/supervision"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	noColor := os.Getenv("NO_COLOR") != "" || !isTerminal(os.Stdout)
	res, err := run(ctx, os.Stdout, noColor)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tree:", err)
		os.Exit(1)
	}
	problems := check(res)
	fmt.Fprintln(os.Stdout, "\n"+verdict(problems))
	if len(problems) > 0 {
		os.Exit(1)
	}
}

// verdict is the example's last line: PASS with what it checked, or FAIL
// with what went wrong.
func verdict(problems []string) string {
	if len(problems) > 0 {
		return "verdict: FAIL: " + strings.Join(problems, "; ")
	}
	return "verdict: PASS: payments restarted 3 times after 100, 200 and 400 ms, shipper with it (rest-for-one); " +
		"both caches restarted after the panic (one-for-all); source, config, warmup and migrate never restarted; " +
		"every permanent child runs again; the tree that cannot heal escalated after 2 restarts"
}

// check compares what a run observed with what the trees promise, and
// returns what differs.
func check(res *result) []string {
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	// payments: three failures, backoff doubling from 100 ms (no jitter).
	var delays []time.Duration
	restarts := map[string]int{}
	for _, ev := range res.Events {
		switch e := ev.(type) {
		case supervision.BackoffScheduled:
			if e.Child == "payments" {
				delays = append(delays, e.Delay)
			}
		case supervision.ChildRestarted:
			restarts[e.Supervisor+"/"+e.Child]++
		}
	}
	if want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}; !slices.Equal(delays, want) {
		fail("payments' backoff delays %v, want %v", delays, want)
	}
	want := map[string]int{
		"shop/orders/payments": 3, "shop/orders/shipper": 3, // rest-for-one: shipper follows payments
		"shop/caches/users": 1, "shop/caches/products": 1, // one-for-all
	}
	if !maps.Equal(restarts, want) {
		fail("restarts %v, want %v (source, config, warmup and migrate never restart)", restarts, want)
	}

	// While healing: payments and shipper wait for the same restart.
	p, sh := find(res.Healing, "orders", "payments"), find(res.Healing, "orders", "shipper")
	switch {
	case p == nil || sh == nil:
		fail("while healing: payments or shipper missing from the tree")
	case p.State != supervision.StateBackoff || sh.State != supervision.StateBackoff || !p.NextRestart.Equal(sh.NextRestart):
		fail("while healing: payments %v (next %v) and shipper %v (next %v) do not wait for the same restart",
			p.State, p.NextRestart, sh.State, sh.NextRestart)
	}
	if src := find(res.Healing, "orders", "source"); src == nil || src.State != supervision.StateRunning {
		fail("while healing: source does not run on (rest-for-one restarts only the children after payments)")
	}

	// Healed: every permanent child runs; the temporary one is gone; the
	// transient one finished normally and stays stopped.
	for _, path := range [][]string{{"config"}, {"orders", "source"}, {"orders", "payments"}, {"orders", "shipper"},
		{"caches", "users"}, {"caches", "products"}} {
		if c := find(res.Healed, path...); c == nil || c.State != supervision.StateRunning {
			fail("healed: %s does not run", strings.Join(path, "/"))
		}
	}
	if pay := find(res.Healed, "orders", "payments"); pay != nil && (pay.Restarts != 3 || pay.Incarnation != 4) {
		fail("healed: payments has %d restarts and incarnation %d, want 3 and 4", pay.Restarts, pay.Incarnation)
	}
	if find(res.Healed, "warmup") != nil {
		fail("healed: the temporary child warmup is still in the tree")
	}
	if m := find(res.Healed, "migrate"); m == nil || m.State != supervision.StateStopped || m.Restarts != 0 {
		fail("healed: the transient child migrate is not stopped without restarts")
	}

	// The doomed tree escalates.
	var ie *supervision.IntensityError
	switch {
	case !errors.As(res.Doomed, &ie):
		fail("the doomed tree returned %v, not an intensity error", res.Doomed)
	case ie.Child != "broken" || ie.Intensity != 2:
		fail("the doomed tree escalated for %q at intensity %d, want broken at 2", ie.Child, ie.Intensity)
	}
	return problems
}

// find returns the child at path (names below the root) in s, or nil.
func find(s supervision.Snapshot, path ...string) *supervision.Snapshot {
	cur := &s
	for _, name := range path {
		var next *supervision.Snapshot
		for i := range cur.Children {
			if cur.Children[i].Name == name {
				next = &cur.Children[i]
			}
		}
		if next == nil {
			return nil
		}
		cur = next
	}
	return cur
}

// result is what a run observed, for the test.
type result struct {
	Events  []supervision.Event
	Healing supervision.Snapshot // taken while payments waits for a restart
	Healed  supervision.Snapshot // taken once every child runs again
	// Doomed is what Run of the tree that cannot heal returned.
	Doomed error
}

// shopSpec is the tree of the first part. payments fails its first three
// incarnations; users panics once.
func shopSpec(payments, users func(context.Context) error) supervision.Spec {
	backoff := supervision.Backoff{Base: 100 * time.Millisecond, Cap: time.Second, Jitter: supervision.NoJitter}
	return supervision.Spec{
		Name:      "shop",
		Strategy:  supervision.OneForOne,
		Intensity: 10, Period: 5 * time.Second,
		Children: []supervision.ChildSpec{
			{Name: "config", Func: steady},
			{Name: "orders", Tree: &supervision.Spec{
				// Later children depend on earlier ones: when payments
				// restarts, shipper restarts with it; source does not.
				Strategy: supervision.RestForOne,
				Children: []supervision.ChildSpec{
					{Name: "source", Func: steady},
					{Name: "payments", Func: payments, Backoff: backoff},
					{Name: "shipper", Func: steady},
				},
			}},
			{Name: "caches", Tree: &supervision.Spec{
				// The two caches must agree: one restarts, both do.
				Strategy: supervision.OneForAll,
				Children: []supervision.ChildSpec{
					{Name: "users", Func: users, Backoff: supervision.Backoff{Base: 50 * time.Millisecond, Jitter: supervision.NoJitter}},
					{Name: "products", Func: steady},
				},
			}},
			// Runs once; removed from the tree when it is done.
			{Name: "warmup", Func: after(200*time.Millisecond, nil), Restart: supervision.Temporary},
			// Restarted only if it fails; it finishes normally and stays stopped.
			{Name: "migrate", Func: after(300*time.Millisecond, nil), Restart: supervision.Transient},
		},
	}
}

// doomedSpec is the tree of the second part: its one child always fails,
// and the supervisor gives up after two restarts within a second.
func doomedSpec() supervision.Spec {
	return supervision.Spec{
		Name:      "doomed",
		Intensity: 2, Period: time.Second,
		Children: []supervision.ChildSpec{{
			Name:    "broken",
			Func:    after(50*time.Millisecond, errors.New("database: no such table: orders")),
			Backoff: supervision.Backoff{Base: 50 * time.Millisecond, Jitter: supervision.NoJitter},
		}},
	}
}

// run runs both parts, printing to out, and returns what it observed.
func run(ctx context.Context, out io.Writer, noColor bool) (*result, error) {
	out = &lockedWriter{w: out} // the hooks log from the trees' own goroutines
	log := slog.New(tint.NewTextHandler(out, &tint.Options{TimeFormat: "15:04:05.000", NoColor: noColor}))
	res := &result{}
	var mu sync.Mutex
	// Signals from the hook: payments scheduled for its third restart, and
	// restarted for the third time.
	third, healed := make(chan struct{}, 1), make(chan struct{}, 1)
	hook := func(ev supervision.Event) {
		mu.Lock()
		res.Events = append(res.Events, ev)
		mu.Unlock()
		logEvent(log, ev)
		switch e := ev.(type) {
		case supervision.BackoffScheduled:
			if e.Child == "payments" && e.Attempt == 3 {
				third <- struct{}{}
			}
		case supervision.ChildRestarted:
			if e.Child == "payments" && e.Restarts == 3 {
				healed <- struct{}{}
			}
		}
	}

	// Part 1: a tree that heals.
	var incarnations atomic.Int32
	payments := func(ctx context.Context) error {
		n := incarnations.Add(1)
		if n <= 3 {
			return after(150*time.Millisecond, fmt.Errorf("payment gateway: connection refused (attempt %d)", n))(ctx)
		}
		return steady(ctx)
	}
	var panicked atomic.Bool
	users := func(ctx context.Context) error {
		if panicked.CompareAndSwap(false, true) {
			if err := after(250*time.Millisecond, nil)(ctx); err != nil || ctx.Err() != nil {
				return err
			}
			panic("users cache: corrupted entry for alice") // a bug
		}
		return steady(ctx)
	}
	tree, err := supervision.New(shopSpec(payments, users), supervision.Options{Hooks: []func(supervision.Event){hook}})
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(out, "Part 1: a tree that heals. The declared tree:")
	fmt.Fprint(out, indent(tree.Snapshot().String()))

	tctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- tree.Run(tctx) }()
	err = func() error {
		defer cancel()
		if err := waitOne(ctx, third, 5*time.Second); err != nil {
			return fmt.Errorf("payments' third failure: %w", err)
		}
		res.Healing = tree.Snapshot() // within its 400 ms backoff
		fmt.Fprintln(out, "\nWhile payments waits 400 ms for its third restart, shipper with it:")
		fmt.Fprint(out, indent(res.Healing.String()))
		if err := waitOne(ctx, healed, 5*time.Second); err != nil {
			return fmt.Errorf("payments' third restart: %w", err)
		}
		if err := sleep(ctx, 300*time.Millisecond); err != nil {
			return err
		}
		res.Healed = tree.Snapshot()
		fmt.Fprintln(out, "\nHealed: every permanent child runs again.")
		fmt.Fprint(out, indent(res.Healed.String()))
		return nil
	}()
	if rerr := <-done; rerr != nil {
		err = errors.Join(err, fmt.Errorf("shop: %w", rerr))
	}
	if err != nil {
		return res, err
	}

	// Part 2: a tree that cannot heal escalates.
	fmt.Fprintln(out, "\nPart 2: a tree whose child always fails, allowed 2 restarts per second.")
	doomed, err := supervision.New(doomedSpec(), supervision.Options{Hooks: []func(supervision.Event){func(ev supervision.Event) { logEvent(log, ev) }}})
	if err != nil {
		return res, err
	}
	dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
	defer dcancel()
	res.Doomed = doomed.Run(dctx)
	var ie *supervision.IntensityError
	if !errors.As(res.Doomed, &ie) {
		return res, fmt.Errorf("doomed: expected an intensity error, got %v", res.Doomed)
	}
	fmt.Fprintf(out, "\nRun returned: %v\n", res.Doomed)
	return res, nil
}

// logEvent prints one event, warnings for failures.
func logEvent(log *slog.Logger, ev supervision.Event) {
	level := slog.LevelInfo
	switch e := ev.(type) {
	case supervision.ChildExited:
		if !e.Normal {
			level = slog.LevelWarn
		}
	case supervision.IntensityExceeded, supervision.Escalated, supervision.StopTimedOut:
		level = slog.LevelError
	}
	log.Log(context.Background(), level, ev.String())
}

// steady runs until it is told to stop.
func steady(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// after returns a child that runs for d and then returns err (nil: a
// normal exit), or returns nil at once when told to stop.
func after(d time.Duration, err error) func(context.Context) error {
	return func(ctx context.Context) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return err
		case <-ctx.Done():
			return nil
		}
	}
}

func waitOne(ctx context.Context, ch <-chan struct{}, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-t.C:
		return fmt.Errorf("not within %v", timeout)
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// indent indents every line of s by two spaces.
func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n  ") + "\n"
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
