package supervision_test

import (
	"context"
	"fmt"

	"github.com/asterforge/aster/supervision"
)

// Children can be started, restarted and stopped while the tree runs.
func ExampleTree_StartChild() {
	tree, err := supervision.New(supervision.Spec{Name: "jobs"}, supervision.Options{})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- tree.Run(ctx) }()
	if err := tree.WaitRunning(ctx); err != nil {
		panic(err)
	}

	job := func(ctx context.Context) error { <-ctx.Done(); return nil }
	for _, name := range []string{"import", "export"} {
		pid, err := tree.StartChild(ctx, "", supervision.ChildSpec{Name: name, Func: job})
		fmt.Println(pid.Id, err)
	}
	_, err = tree.RestartChild(ctx, "import")
	fmt.Println("restart:", err)
	fmt.Println("stop:", tree.StopChild(ctx, "export"))
	n, _ := tree.Count("")
	fmt.Printf("%+v\n", n)
	fmt.Print(tree.Snapshot())

	cancel()
	fmt.Println("Run:", <-done)
	// Output:
	// jobs/import <nil>
	// jobs/export <nil>
	// restart: <nil>
	// stop: <nil>
	// {Specs:1 Active:1 Supervisors:0 Workers:1}
	// jobs (supervisor, one-for-one) running pid=jobs
	// └── import (func, permanent) running pid=jobs/import incarnation=2 restarts=1
	// Run: <nil>
}
