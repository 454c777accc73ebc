package check

import (
	"math"
	"slices"
	"time"
)

// Summary describes a latency distribution.
type Summary struct {
	N             int
	P50, P99, Max time.Duration
}

// Percentile returns the q-quantile (0 <= q <= 1) of ds by the nearest-rank
// method, or 0 for no samples.
func Percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(q * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

// Summarize returns the count, median, 99th percentile and maximum of ds.
func Summarize(ds []time.Duration) Summary {
	if len(ds) == 0 {
		return Summary{}
	}
	return Summary{N: len(ds), P50: Percentile(ds, 0.5), P99: Percentile(ds, 0.99), Max: slices.Max(ds)}
}

// Latencies returns the latencies of the handovers with one of causes (all
// measured ones when causes is empty).
func Latencies(hs []Handover, causes ...string) []time.Duration {
	var ds []time.Duration
	for _, h := range hs {
		if h.Cause == "expiry" || (len(causes) > 0 && !slices.Contains(causes, h.Cause)) {
			continue
		}
		ds = append(ds, h.Latency)
	}
	return ds
}
