package testrec

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type event interface{ isEvent() }
type a struct{ n int }
type b struct{}

func (a) isEvent() {}
func (b) isEvent() {}

func TestAllKeepsOrderAndFiltersByType(t *testing.T) {
	var r Recorder[event]
	r.Hook(a{1})
	r.Hook(b{})
	r.Hook(a{2})
	as, at := All[a](&r)
	if len(as) != 2 || as[0].n != 1 || as[1].n != 2 || len(at) != 2 {
		t.Fatalf("All[a] = %v (%d times), want [{1} {2}]", as, len(at))
	}
	if at[1].Before(at[0]) {
		t.Fatalf("times out of order: %v", at)
	}
	if n := Count[b](&r); n != 1 {
		t.Fatalf("Count[b] = %d, want 1", n)
	}
}
