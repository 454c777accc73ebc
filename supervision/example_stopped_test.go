package supervision_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/asterforge/aster/supervision"
)

// Whoever spawns a tree's Props learns, once the root actor has
// terminated, which children it abandoned after their shutdown time and
// still run (Unstopped), and when they have all exited (Stopped). Here a
// Func child ignores its context until it is released.
func ExampleTree_Stopped() {
	release := make(chan struct{})
	flush := func(context.Context) error {
		<-release // ignores its context
		return nil
	}
	tree, err := supervision.New(supervision.Spec{
		Name:     "workload",
		Children: []supervision.ChildSpec{{Name: "flush", Func: flush, Shutdown: 10 * time.Millisecond}},
	}, supervision.Options{})
	if err != nil {
		panic(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	defer sys.Shutdown()
	pid := sys.Root.Spawn(tree.Props())
	if err := tree.WaitRunning(context.Background()); err != nil {
		panic(err)
	}

	fmt.Println("root stopped:", sys.Root.StopFuture(pid).Wait())
	fmt.Println(tree.Unstopped())
	select {
	case <-tree.Stopped():
		fmt.Println("everything stopped")
	default:
		fmt.Println("still running")
	}

	close(release)
	<-tree.Stopped()
	fmt.Println("everything stopped; unstopped:", tree.Unstopped() == nil)
	// Output:
	// root stopped: <nil>
	// supervision: children did not stop in time: workload/flush (after 10ms)
	// still running
	// everything stopped; unstopped: true
}
