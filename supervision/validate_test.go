package supervision_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/supervision"
)

func TestValidation(t *testing.T) {
	props := actor.PropsFromFunc(func(actor.Context) {})
	fn := func(context.Context) error { return nil }
	self := &supervision.Spec{}
	self.Children = []supervision.ChildSpec{{Name: "me", Tree: self}}
	for _, tc := range []struct {
		name string
		spec supervision.Spec
		want []string // one message per problem
	}{
		{"zero spec", supervision.Spec{}, nil},
		{"all kinds", supervision.Spec{Children: []supervision.ChildSpec{
			{Name: "a", Props: props}, {Name: "f", Func: fn}, {Name: "t", Tree: &supervision.Spec{}},
			{Name: "s", Service: serviceFunc(fn)},
		}}, nil},
		{"duplicate names", supervision.Spec{Name: "app", Children: []supervision.ChildSpec{
			{Name: "a", Props: props}, {Name: "a", Func: fn},
		}}, []string{"app/a: duplicate name"}},
		{"duplicate names in a subtree", supervision.Spec{Name: "app", Children: []supervision.ChildSpec{
			{Name: "t", Tree: &supervision.Spec{Children: []supervision.ChildSpec{{Name: "x", Func: fn}, {Name: "x", Func: fn}}}},
		}}, []string{"app/t/x: duplicate name"}},
		{"missing producer", supervision.Spec{Name: "app", Children: []supervision.ChildSpec{{Name: "a"}}},
			[]string{"app/a: missing producer: set one of Props, Func, Service and Tree"}},
		{"two producers", supervision.Spec{Name: "app", Children: []supervision.ChildSpec{{Name: "a", Props: props, Func: fn}}},
			[]string{"app/a: more than one of Props, Func, Service and Tree set"}},
		{"empty name", supervision.Spec{Name: "app", Children: []supervision.ChildSpec{{Func: fn}}},
			[]string{"app/[unnamed]: empty name"}},
		{"slash in name", supervision.Spec{Name: "app", Children: []supervision.ChildSpec{{Name: "a/b", Func: fn}}},
			[]string{"app/a/b: name must not contain '/'"}},
		{"hash in name", supervision.Spec{Name: "app", Children: []supervision.ChildSpec{{Name: "a#2", Func: fn}}},
			[]string{"app/a#2: name must not contain '#'"}},
		{"hash in the root name", supervision.Spec{Name: "app#1"}, []string{"app#1: name must not contain '#'"}},
		{"negative shutdown", supervision.Spec{Name: "app", Children: []supervision.ChildSpec{{Name: "a", Func: fn, Shutdown: -1}}},
			[]string{"app/a: negative shutdown timeout -1ns"}},
		{"negative start timeout", supervision.Spec{Name: "app", Children: []supervision.ChildSpec{{Name: "a", Func: fn, StartTimeout: -time.Second}}},
			[]string{"app/a: negative start timeout -1s"}},
		{"negative period", supervision.Spec{Name: "app", Period: -time.Second}, []string{"app: negative period -1s"}},
		{"backoff cap below base", supervision.Spec{Name: "app", Children: []supervision.ChildSpec{
			{Name: "a", Func: fn, Backoff: supervision.Backoff{Base: time.Minute, Cap: time.Second}},
		}}, []string{"app/a: backoff: cap 1s is below the base 1m0s"}},
		{"negative backoff", supervision.Spec{Name: "app", Children: []supervision.ChildSpec{
			{Name: "a", Func: fn, Backoff: supervision.Backoff{Base: -1}},
		}}, []string{"app/a: backoff: durations must not be negative (base -1ns, cap 0s, reset after 0s)"}},
		{"immediate ignores the rest", supervision.Spec{Name: "app", Children: []supervision.ChildSpec{
			{Name: "a", Func: fn, Backoff: supervision.Backoff{Base: time.Minute, Cap: time.Second, Immediate: true}},
		}}, nil},
		{"unknown enums", supervision.Spec{Name: "app", Strategy: 7, Children: []supervision.ChildSpec{{Name: "a", Func: fn, Restart: 9}}},
			[]string{"app: unknown strategy 7", "app/a: unknown restart type 9"}},
		{"a spec inside itself", supervision.Spec{Name: "app", Children: []supervision.ChildSpec{{Name: "loop", Tree: self}}},
			[]string{"app/loop/me: spec contains itself"}},
		{"several problems", supervision.Spec{Name: "app", Children: []supervision.ChildSpec{
			{Name: "a"}, {Name: "b", Func: fn, Shutdown: -time.Second},
		}}, []string{"app/a: missing producer: set one of Props, Func, Service and Tree", "app/b: negative shutdown timeout -1s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tree, err := supervision.New(tc.spec, supervision.Options{})
			if tc.want == nil {
				require.NoError(t, err)
				require.NotNil(t, tree)
				return
			}
			require.Error(t, err)
			assert.Nil(t, tree)
			assert.ErrorIs(t, err, supervision.ErrInvalidSpec)
			var got []string
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				var se *supervision.SpecError
				require.True(t, errors.As(e, &se))
				got = append(got, se.Path+": "+se.Reason)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// serviceFunc makes a function a Service.
type serviceFunc func(context.Context) error

func (f serviceFunc) Serve(ctx context.Context) error { return f(ctx) }

func TestNewDoesNotKeepTheCallersSpec(t *testing.T) {
	spec := supervision.Spec{Name: "app", Children: []supervision.ChildSpec{{Name: "a", Func: func(context.Context) error { return nil }}}}
	tree, err := supervision.New(spec, supervision.Options{})
	require.NoError(t, err)
	spec.Children[0].Name = "changed"
	assert.Equal(t, "a", tree.Snapshot().Children[0].Name)
	assert.Equal(t, time.Duration(0), spec.Children[0].Shutdown, "defaults are not written into the caller's spec")
}
