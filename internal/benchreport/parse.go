package benchreport

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Run is one result line of a benchmark: its iteration count and its
// values by unit ("ns/op", "B/op", custom units of b.ReportMetric).
type Run struct {
	Iters  int
	Values map[string]float64
}

// Benchmark is every run of one benchmark of one package.
type Benchmark struct {
	Pkg  string // import path, from the "pkg:" line before it
	Name string // full name with sub-benchmarks, without the -GOMAXPROCS suffix
	Runs []Run
}

// Values returns the benchmark's values of unit, one per run that has it,
// in the order of the runs.
func (b *Benchmark) Values(unit string) []float64 {
	var out []float64
	for _, r := range b.Runs {
		if v, ok := r.Values[unit]; ok {
			out = append(out, v)
		}
	}
	return out
}

// Results are parsed benchmark results, in the order first seen.
type Results struct {
	// Config holds the last value of each "key: value" header line
	// (goos, goarch, cpu, pkg).
	Config  map[string]string
	benches []*Benchmark
	index   map[string]*Benchmark
}

// NewResults returns empty Results.
func NewResults() *Results {
	return &Results{Config: map[string]string{}, index: map[string]*Benchmark{}}
}

// Benchmarks returns every benchmark, in the order first seen.
func (rs *Results) Benchmarks() []*Benchmark { return rs.benches }

// Get returns the benchmark name of the package whose import path is pkg or
// ends in "/"+pkg, or nil.
func (rs *Results) Get(pkg, name string) *Benchmark {
	for _, b := range rs.benches {
		if b.Name == name && (b.Pkg == pkg || strings.HasSuffix(b.Pkg, "/"+pkg)) {
			return b
		}
	}
	return nil
}

// Values returns the values of unit of a benchmark (see Get), or nil.
func (rs *Results) Values(pkg, name, unit string) []float64 {
	if b := rs.Get(pkg, name); b != nil {
		return b.Values(unit)
	}
	return nil
}

// Parse reads the output of go test -bench (any number of packages and
// runs, as with -count) into rs. procs is the GOMAXPROCS of the run: Go
// appends "-procs" to every benchmark name when it is not 1, and Parse
// strips exactly that suffix, so that a sub-benchmark named "owners-8"
// keeps its name. Lines that are not results or headers (logs, PASS, ok)
// are skipped; a malformed result line is an error.
func (rs *Results) Parse(r io.Reader, procs int) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	suffix := ""
	if procs > 1 {
		suffix = "-" + strconv.Itoa(procs)
	}
	pkg := ""
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if k, v, ok := header(text); ok {
			rs.Config[k] = v
			if k == "pkg" {
				pkg = v
			}
			continue
		}
		if !strings.HasPrefix(text, "Benchmark") {
			continue
		}
		fields := strings.Fields(text)
		if len(fields) < 2 {
			continue // a benchmark that failed or logged: "BenchmarkX" alone, or "--- FAIL"
		}
		iters, err := strconv.Atoi(fields[1])
		if err != nil {
			continue // a log line that happens to start with "Benchmark"
		}
		if len(fields)%2 != 0 {
			return fmt.Errorf("benchreport: line %d: value without a unit: %q", line, text)
		}
		run := Run{Iters: iters, Values: make(map[string]float64, (len(fields)-2)/2)}
		for i := 2; i < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return fmt.Errorf("benchreport: line %d: value %q: %w", line, fields[i], err)
			}
			run.Values[fields[i+1]] = v
		}
		name := strings.TrimSuffix(fields[0], suffix)
		key := pkg + "\x00" + name
		b := rs.index[key]
		if b == nil {
			b = &Benchmark{Pkg: pkg, Name: name}
			rs.index[key] = b
			rs.benches = append(rs.benches, b)
		}
		b.Runs = append(b.Runs, run)
	}
	return sc.Err()
}

// header parses a "key: value" configuration line of the benchmark format
// (lower-case key without spaces).
func header(line string) (key, value string, ok bool) {
	k, v, found := strings.Cut(line, ":")
	if !found || k == "" || strings.ContainsAny(k, " \t") || strings.HasPrefix(k, "Benchmark") {
		return "", "", false
	}
	for _, c := range k {
		if (c < 'a' || c > 'z') && c != '-' && c != '_' {
			return "", "", false
		}
	}
	return k, strings.TrimSpace(v), true
}
