package benchreport

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const sampleOutput = `goos: linux
goarch: amd64
pkg: github.com/asterforge/aster/natsstore
cpu: Intel(R) Xeon(R) Processor
BenchmarkStoreVsRawKV/acquire-2   	   10837	     45325 ns/op	     42777 raw-ns/op	         1.060 store/raw	    1234 B/op	      20 allocs/op
BenchmarkStoreVsRawKV/acquire-2   	   11530	     45555 ns/op	     40560 raw-ns/op	         1.123 store/raw	    1234 B/op	      20 allocs/op
    bench_test.go:12: a log line
BenchmarkRenewals/owners-8-2      	     100	      1000 ns/op
PASS
ok  	github.com/asterforge/aster/natsstore	11.412s
goos: linux
goarch: amd64
pkg: github.com/asterforge/aster/actors
cpu: Intel(R) Xeon(R) Processor
BenchmarkHandover/watch-2  	      10	  23089131 ns/op	  8478926 p50-ns	  40936930 p99-ns
BenchmarkHandover
--- FAIL: BenchmarkBroken
BenchmarkLogged says hello
PASS
`

func TestParse(t *testing.T) {
	rs := NewResults()
	require.NoError(t, rs.Parse(strings.NewReader(sampleOutput), 2))

	assert.Equal(t, "Intel(R) Xeon(R) Processor", rs.Config["cpu"])
	assert.Equal(t, "github.com/asterforge/aster/actors", rs.Config["pkg"])
	require.Len(t, rs.Benchmarks(), 3)

	acq := rs.Get("natsstore", "BenchmarkStoreVsRawKV/acquire")
	require.NotNil(t, acq)
	assert.Equal(t, "github.com/asterforge/aster/natsstore", acq.Pkg)
	require.Len(t, acq.Runs, 2)
	assert.Equal(t, 10837, acq.Runs[0].Iters)
	assert.Equal(t, []float64{45325, 45555}, acq.Values("ns/op"))
	assert.Equal(t, []float64{1.060, 1.123}, acq.Values("store/raw"))
	assert.Equal(t, []float64{20, 20}, acq.Values("allocs/op"))
	assert.Empty(t, acq.Values("no-such-unit"))

	// Only the -GOMAXPROCS suffix is stripped.
	assert.NotNil(t, rs.Get("natsstore", "BenchmarkRenewals/owners-8"))
	// Packages are told apart, by full path or last element.
	assert.Equal(t, []float64{40936930}, rs.Values("github.com/asterforge/aster/actors", "BenchmarkHandover/watch", "p99-ns"))
	assert.Nil(t, rs.Values("natsstore", "BenchmarkHandover/watch", "p99-ns"))
	assert.Nil(t, rs.Get("aster/actors/x", "BenchmarkHandover/watch"))
}

func TestParseWithOneProc(t *testing.T) {
	rs := NewResults()
	require.NoError(t, rs.Parse(strings.NewReader("pkg: p\nBenchmarkX/n-8 	 10	 5 ns/op\n"), 1))
	assert.NotNil(t, rs.Get("p", "BenchmarkX/n-8"), "no suffix to strip with GOMAXPROCS 1")
}

func TestParseRejectsMalformedResults(t *testing.T) {
	for name, in := range map[string]string{
		"value without unit": "BenchmarkX-2 	 10	 5 ns/op	 7\n",
		"bad value":          "BenchmarkX-2 	 10	 five ns/op\n",
	} {
		t.Run(name, func(t *testing.T) {
			err := NewResults().Parse(strings.NewReader(in), 2)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "line 1")
		})
	}
}
