package supervision_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/asterforge/aster/supervision"
)

// A transient Func child that fails once is restarted, then exits normally
// and is left stopped. The hook prints the events; Run returns nil once the
// context is cancelled and everything has stopped.
func Example() {
	var attempts atomic.Int32
	migrate := func(ctx context.Context) error {
		if attempts.Add(1) == 1 {
			return errors.New("database not ready")
		}
		return nil // done: a normal exit
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tree, err := supervision.New(supervision.Spec{
		Name: "app",
		Children: []supervision.ChildSpec{
			{Name: "migrate", Func: migrate, Restart: supervision.Transient, Backoff: supervision.Backoff{Immediate: true}},
		},
	}, supervision.Options{Hooks: []func(supervision.Event){func(e supervision.Event) {
		fmt.Println(e)
		if exit, ok := e.(supervision.ChildExited); ok && exit.Normal {
			cancel()
		}
	}}})
	if err != nil {
		panic(err)
	}
	fmt.Println("Run:", tree.Run(ctx))
	// Output:
	// app/migrate started (incarnation 1)
	// app/migrate failed (incarnation 1): database not ready
	// app/migrate restarts in 0s (attempt 1)
	// app/migrate restarted (incarnation 2, restart 1): database not ready
	// app/migrate exited normally (incarnation 2)
	// Run: <nil>
}
