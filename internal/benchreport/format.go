package benchreport

import (
	"fmt"
	"math"
	"strings"
)

// fmtNs formats a duration in nanoseconds with three significant digits
// and a unit that suits it.
func fmtNs(ns float64) string {
	if math.IsNaN(ns) {
		return "n/a"
	}
	abs := math.Abs(ns)
	switch {
	case abs < 1e3:
		return sig(ns) + " ns"
	case abs < 1e6:
		return sig(ns/1e3) + " µs"
	case abs < 1e9:
		return sig(ns/1e6) + " ms"
	default:
		return sig(ns/1e9) + " s"
	}
}

// fmtBytes formats a byte count in B, KB (1024) or MB.
func fmtBytes(b float64) string {
	switch {
	case math.IsNaN(b):
		return "n/a"
	case math.Abs(b) < 1024:
		return sig(b) + " B"
	case math.Abs(b) < 1024*1024:
		return sig(b/1024) + " KB"
	default:
		return sig(b/1024/1024) + " MB"
	}
}

// sig formats v with three significant digits, without an exponent.
func sig(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	abs := math.Abs(v)
	switch {
	case abs >= 100 || abs == 0:
		return fmt.Sprintf("%.0f", v)
	case abs >= 10:
		return fmt.Sprintf("%.1f", v)
	case abs >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3g", v), "0"), ".")
	}
}

// fmtRatio formats a ratio such as 1.04x.
func fmtRatio(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "n/a"
	}
	if math.Abs(r) < 0.01 {
		return fmt.Sprintf("%.4fx", r)
	}
	return fmt.Sprintf("%.2fx", r)
}

// fmtSpread formats a Spread as benchstat does: median ±spread%, with the
// number of runs, using f for the median.
func fmtSpread(s Spread, f func(float64) string) string {
	if !s.Valid() {
		return "not measured"
	}
	pct := s.Pct()
	if math.IsNaN(pct) || s.N < 2 {
		return fmt.Sprintf("%s (n=%d)", f(s.Median), s.N)
	}
	return fmt.Sprintf("%s ±%.0f%% (n=%d)", f(s.Median), pct, s.N)
}

// durAxis formats nanosecond tick labels of a plot: 100 µs, 1 ms, 2.5 s.
func durAxis(ns float64) string {
	num, unit, _ := strings.Cut(fmtNs(ns), " ")
	return trimZeros(num) + " " + unit
}

// countAxis formats counts: 1000 as 1k, 100000 as 100k, 2500 as 2.5k.
func countAxis(v float64) string {
	switch {
	case v >= 1e6:
		return trimZeros(sig(v/1e6)) + "M"
	case v >= 1e3:
		return trimZeros(sig(v/1e3)) + "k"
	default:
		return trimZeros(sig(v))
	}
}

// fmtCount formats a count with three significant digits, without
// trailing zeros: 30, 3.5, 39400.
func fmtCount(v float64) string { return trimZeros(sig(v)) }

func trimZeros(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}
