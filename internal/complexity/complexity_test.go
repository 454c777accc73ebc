package complexity

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The figures of testdata/fixture.go.txt as gocyclo v0.6.0 prints them.
func TestFileMatchesGocyclo(t *testing.T) {
	funcs, err := File("testdata/fixture.go.txt", "fixture/fixture.go")
	require.NoError(t, err)
	got := map[string]int{}
	for _, f := range funcs {
		assert.Equal(t, "fixture", f.Dir)
		got[f.Name] = f.Complexity
	}
	assert.Equal(t, map[string]int{"straight": 1, "branches": 11, "(T).value": 1, "(*T).pointer": 3}, got)
}

func TestLimit(t *testing.T) {
	for dir, want := range map[string]int{
		"natsstore": 15, "natsstore/embedded": 15, "lease": 15, "lease/leasetest": 15, "actors": 15,
		"lock": 15, "internal/leasehold": 15, "leasework": 20, "shard": 20, "internal/backoff": 20, "monitor": 20,
	} {
		assert.Equal(t, want, Limit(dir), dir)
	}
}

func TestParseAllowlist(t *testing.T) {
	allow, err := ParseAllowlist(strings.NewReader("# a comment\n\n26 lock (*contender).wait\n 21 shard (*view).record \n"))
	require.NoError(t, err)
	assert.Equal(t, Allowlist{"lock (*contender).wait": 26, "shard (*view).record": 21}, allow)
	for _, bad := range []string{"26 lock\n", "x lock f\n", "0 lock f\n", "3 lock f\n4 lock f\n"} {
		_, err := ParseAllowlist(strings.NewReader(bad))
		assert.Error(t, err, "%q", bad)
	}
}

func TestCheck(t *testing.T) {
	funcs := []Func{
		{Dir: "lock", Name: "small", Complexity: 15},
		{Dir: "shard", Name: "medium", Complexity: 20},
		{Dir: "lock", Name: "new", Complexity: 16, Pos: "lock/new.go:3"},
		{Dir: "shard", Name: "grew", Complexity: 25, Pos: "shard/grew.go:7"},
		{Dir: "natsstore", Name: "same", Complexity: 30},
		{Dir: "natsstore", Name: "shrank", Complexity: 28},
		{Dir: "actors", Name: "fixed", Complexity: 12},
		{Dir: "lock", Name: "tagged", Complexity: 9},
		{Dir: "lock", Name: "tagged", Complexity: 17, Pos: "lock/tagged_linux.go:1"},
	}
	allow := Allowlist{"shard grew": 24, "natsstore same": 30, "natsstore shrank": 29, "actors fixed": 18, "lock gone": 40}
	v := Check(funcs, allow)
	require.Len(t, v.Failures, 3)
	assert.Contains(t, v.Failures[0], "lock/new.go:3: new has complexity 16, over the limit of 15")
	assert.Contains(t, v.Failures[1], "lock/tagged_linux.go:1: tagged has complexity 17")
	assert.Contains(t, v.Failures[2], "shard/grew.go:7: grew has complexity 25, more than the 24")
	assert.Equal(t, []string{"actors fixed: 12, within its limit now", "lock gone: gone", "natsstore shrank: 28, listed at 29"}, v.Lower)

	assert.Equal(t, Allowlist{"shard grew": 24, "natsstore same": 30, "natsstore shrank": 28}, Tightened(funcs, allow),
		"tightening never raises a figure nor adds a function")
}

func TestFormat(t *testing.T) {
	var b strings.Builder
	require.NoError(t, Format(&b, "# h\n", Allowlist{"b f": 17, "a g": 17, "c h": 30}))
	assert.Equal(t, "# h\n30 c h\n17 a g\n17 b f\n", b.String())
}
