package benchreport

import (
	"math"
	"slices"
)

// Median returns the median of xs (the mean of the two middle values for an
// even count), or NaN for no values.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Percentile returns the q-quantile (0 <= q <= 1) of xs by the nearest-rank
// method (the smallest value with at least q of the values at or below
// it), or NaN for no values.
func Percentile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(math.Ceil(q * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

// Spread summarises repeated measurements the way benchstat does: the
// median, and the range around it. With six runs or fewer, the range is
// the 95% confidence interval of the median that benchstat prints.
type Spread struct {
	N                int
	Median, Min, Max float64
}

// Summarize returns the Spread of xs.
func Summarize(xs []float64) Spread {
	if len(xs) == 0 {
		return Spread{Median: math.NaN(), Min: math.NaN(), Max: math.NaN()}
	}
	return Spread{N: len(xs), Median: Median(xs), Min: slices.Min(xs), Max: slices.Max(xs)}
}

// Pct returns the largest distance from the median to the range's ends,
// as a percentage of the median (benchstat's "±"), or NaN.
func (s Spread) Pct() float64 {
	if s.N == 0 || s.Median == 0 {
		return math.NaN()
	}
	return 100 * max(s.Max-s.Median, s.Median-s.Min) / math.Abs(s.Median)
}

// Valid reports whether s has any measurement.
func (s Spread) Valid() bool { return s.N > 0 }

// Ratios returns a[i]/b[i] for each pair; a and b are runs measured side
// by side (the same index is the same round). Pairs with b[i] == 0 are
// skipped.
func Ratios(a, b []float64) []float64 {
	out := make([]float64, 0, min(len(a), len(b)))
	for i := range min(len(a), len(b)) {
		if b[i] != 0 {
			out = append(out, a[i]/b[i])
		}
	}
	return out
}

// CDF returns the empirical cumulative distribution of xs: the sorted
// values, and for each the fraction of values at or below it.
func CDF(xs []float64) (x, y []float64) {
	x = slices.Clone(xs)
	slices.Sort(x)
	y = make([]float64, len(x))
	for i := range x {
		y[i] = float64(i+1) / float64(len(x))
	}
	return x, y
}
