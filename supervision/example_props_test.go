package supervision_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/asterforge/aster/supervision"
)

// A tree's Props run it as an actor inside another actor system, for
// example as the workload of a lease supervisor. Stopping the actor stops
// the children in reverse order, each within its shutdown time.
func ExampleTree_Props() {
	echo := actor.PropsFromFunc(func(c actor.Context) {
		if s, ok := c.Message().(string); ok {
			c.Respond("echo: " + s)
		}
	})
	tree, err := supervision.New(supervision.Spec{
		Children: []supervision.ChildSpec{{Name: "echo", Props: echo}},
	}, supervision.Options{})
	if err != nil {
		panic(err)
	}

	quiet := slog.New(slog.DiscardHandler)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	defer sys.Shutdown()
	pid, err := sys.Root.SpawnNamed(tree.Props(), "workload")
	if err != nil {
		panic(err)
	}
	if err := tree.WaitRunning(context.Background()); err != nil {
		panic(err)
	}
	// Send straight to the child: the supervisor is not on the message path.
	child := tree.Snapshot().Children[0].PID
	fmt.Println(child.Id)
	reply, err := sys.Root.RequestFuture(child, "hello", -1).Result()
	fmt.Println(reply, err)

	fmt.Println(sys.Root.StopFuture(pid).Wait())
	fmt.Println(tree.Snapshot().Children[0].State)
	// Output:
	// workload/echo
	// echo: hello <nil>
	// <nil>
	// stopped
}
