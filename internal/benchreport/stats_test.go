package benchreport

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMedian(t *testing.T) {
	assert.Equal(t, 3.0, Median([]float64{5, 1, 3}))
	assert.Equal(t, 2.5, Median([]float64{4, 1, 3, 2}))
	assert.Equal(t, 7.0, Median([]float64{7}))
	assert.True(t, math.IsNaN(Median(nil)))
	xs := []float64{3, 1, 2}
	Median(xs)
	assert.Equal(t, []float64{3, 1, 2}, xs, "the input is not reordered")
}

func TestPercentileIsNearestRank(t *testing.T) {
	xs := make([]float64, 100)
	for i := range xs {
		xs[i] = float64(100 - i) // 100 .. 1
	}
	for _, tc := range []struct{ q, want float64 }{
		{0, 1}, {0.01, 1}, {0.5, 50}, {0.9, 90}, {0.99, 99}, {0.995, 100}, {1, 100},
	} {
		assert.Equal(t, tc.want, Percentile(xs, tc.q), "q=%v", tc.q)
	}
	// With fewer than 100 samples the p99 is the maximum.
	assert.Equal(t, 10.0, Percentile([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.99))
	assert.True(t, math.IsNaN(Percentile(nil, 0.5)))
}

func TestSummarizeAndSpread(t *testing.T) {
	s := Summarize([]float64{100, 104, 98, 101, 99, 102})
	assert.Equal(t, 6, s.N)
	assert.Equal(t, 100.5, s.Median)
	assert.Equal(t, 98.0, s.Min)
	assert.Equal(t, 104.0, s.Max)
	assert.InDelta(t, 100*3.5/100.5, s.Pct(), 1e-9)
	assert.True(t, s.Valid())

	empty := Summarize(nil)
	assert.False(t, empty.Valid())
	assert.True(t, math.IsNaN(empty.Pct()))
	assert.Equal(t, "not measured", fmtSpread(empty, fmtNs))
	assert.Equal(t, "100 ns ±3% (n=6)", fmtSpread(s, fmtNs))
	assert.Equal(t, "1.05x (n=1)", fmtSpread(Summarize([]float64{1.05}), fmtRatio))
}

func TestRatios(t *testing.T) {
	assert.Equal(t, []float64{2, 0.5}, Ratios([]float64{4, 1, 9}, []float64{2, 2}))
	assert.Equal(t, []float64{3}, Ratios([]float64{1, 3}, []float64{0, 1}), "division by zero is skipped")
}

func TestCDF(t *testing.T) {
	x, y := CDF([]float64{30, 10, 20, 40})
	assert.Equal(t, []float64{10, 20, 30, 40}, x)
	assert.Equal(t, []float64{0.25, 0.5, 0.75, 1}, y)
}

func TestFormats(t *testing.T) {
	for _, tc := range []struct {
		ns   float64
		want string
	}{
		{12, "12.0 ns"}, {999, "999 ns"}, {1500, "1.50 µs"}, {45325, "45.3 µs"},
		{8.4789e6, "8.48 ms"}, {1.0e9, "1.00 s"}, {math.NaN(), "n/a"},
	} {
		assert.Equal(t, tc.want, fmtNs(tc.ns))
	}
	assert.Equal(t, "1 ms", durAxis(1e6))
	assert.Equal(t, "100 µs", durAxis(1e5))
	assert.Equal(t, "2.5 s", durAxis(2.5e9))
	assert.Equal(t, "3.50 KB", fmtBytes(3584))
	assert.Equal(t, "1.07x", fmtRatio(1.0712))
	assert.Equal(t, "0.0039x", fmtRatio(0.0039))
	assert.Equal(t, "100k", countAxis(1e5))
	assert.Equal(t, "n/a", fmtRatio(math.Inf(1)))
}
