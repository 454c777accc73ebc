package supervision_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/asterforge/aster/supervision"
)

// A child that keeps failing exhausts the restart intensity: the tree stops
// and Run returns an error naming the child and its failure.
func ExampleIntensityError() {
	tree, err := supervision.New(supervision.Spec{
		Name:      "app",
		Intensity: 2, // in the default period of 5 s
		Children: []supervision.ChildSpec{
			{Name: "flaky", Backoff: supervision.Backoff{Immediate: true}, Func: func(context.Context) error {
				return errors.New("connection refused")
			}},
		},
	}, supervision.Options{})
	if err != nil {
		panic(err)
	}
	err = tree.Run(context.Background())
	fmt.Println(err)
	var ie *supervision.IntensityError
	if errors.As(err, &ie) {
		fmt.Println("child:", ie.Child)
	}
	// Output:
	// supervision: app: more than 2 restarts in 5s: child "flaky": connection refused
	// child: flaky
}
