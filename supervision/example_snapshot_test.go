package supervision_test

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/asterforge/aster/supervision"
)

// A snapshot prints as a text tree. Children are addressed by PID ids made
// of the supervisors' names, stable across restarts.
func ExampleTree_Snapshot() {
	idle := actor.PropsFromFunc(func(actor.Context) {})
	tree, err := supervision.New(supervision.Spec{
		Name: "app",
		Children: []supervision.ChildSpec{
			{Name: "db", Props: idle},
			{Name: "workers", Tree: &supervision.Spec{
				Strategy: supervision.RestForOne,
				Children: []supervision.ChildSpec{
					{Name: "w1", Props: idle},
					{Name: "w2", Func: func(ctx context.Context) error { <-ctx.Done(); return nil }, Restart: supervision.Transient},
				},
			}},
		},
	}, supervision.Options{})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- tree.Run(ctx) }()
	if err := tree.WaitRunning(ctx); err != nil {
		panic(err)
	}
	fmt.Print(tree.Snapshot())
	cancel()
	fmt.Println("Run:", <-done)
	// Output:
	// app (supervisor, one-for-one) running pid=app
	// ├── db (actor, permanent) running pid=app/db incarnation=1
	// └── workers (supervisor, rest-for-one, permanent) running pid=app/workers incarnation=1
	//     ├── w1 (actor, permanent) running pid=app/workers/w1 incarnation=1
	//     └── w2 (func, transient) running pid=app/workers/w2 incarnation=1
	// Run: <nil>
}
