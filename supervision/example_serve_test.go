package supervision_test

import (
	"context"
	"fmt"

	"github.com/asterforge/aster/supervision"
)

// greeter is a Service: it answers requests until its context is done.
type greeter struct{ requests chan chan string }

func (g greeter) Serve(ctx context.Context) error {
	for {
		select {
		case reply := <-g.requests:
			reply <- "hello"
		case <-ctx.Done():
			fmt.Println("greeter:", context.Cause(ctx))
			return nil
		}
	}
}

// ServeBackground runs a tree in the background and returns once every
// child has started; its channel receives what Run returns. A Service is
// supervised like a Func.
func ExampleTree_ServeBackground() {
	g := greeter{requests: make(chan chan string)}
	tree, err := supervision.New(supervision.Spec{
		Name:     "app",
		Children: []supervision.ChildSpec{{Name: "greeter", Service: g}},
	}, supervision.Options{})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := tree.ServeBackground(ctx)
	fmt.Println(tree.Snapshot().Children[0].State)

	reply := make(chan string)
	g.requests <- reply
	fmt.Println(<-reply)

	cancel()
	fmt.Println("Run:", <-errc)
	// Output:
	// running
	// hello
	// greeter: supervision: shutdown
	// Run: <nil>
}
