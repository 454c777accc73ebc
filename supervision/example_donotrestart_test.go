package supervision_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/asterforge/aster/supervision"
)

// A child that returns an error wrapping ErrDoNotRestart is not restarted,
// even a permanent one, and the tree runs on. A transient child that
// returns nil (OTP's answer: a normal exit) is not restarted either, but
// OneForAll and RestForOne start it again with its group.
func ExampleErrDoNotRestart() {
	errNoConfig := errors.New("no config file")
	importer := func(ctx context.Context) error {
		return fmt.Errorf("importer: %w (%w)", errNoConfig, supervision.ErrDoNotRestart)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tree, err := supervision.New(supervision.Spec{
		Name:     "app",
		Children: []supervision.ChildSpec{{Name: "importer", Func: importer}},
	}, supervision.Options{Hooks: []func(supervision.Event){func(e supervision.Event) {
		fmt.Println(e)
		if _, ok := e.(supervision.ChildExited); ok {
			cancel()
		}
	}}})
	if err != nil {
		panic(err)
	}
	fmt.Println("Run:", tree.Run(ctx))
	s := tree.Snapshot().Children[0]
	fmt.Println(s.State, errors.Is(s.LastFailure, errNoConfig))
	// Output:
	// app/importer started (incarnation 1)
	// app/importer failed (incarnation 1): importer: no config file (supervision: do not restart)
	// Run: <nil>
	// stopped true
}
