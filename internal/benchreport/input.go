package benchreport

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Layout of a run directory, as make bench writes it:
//
//	*.bench.txt       go test -bench output, one file per command
//	samples/*.txt     raw latencies in nanoseconds, one per line
//	prof/*.top.txt    go tool pprof -top output
//	benchstat.txt     benchstat's summary
//	commands.txt      the commands run, one per line
//	start             the start time (RFC 3339), first line
//	load-before       /proc/loadavg at the start
//	warnings.txt      commands that failed after their benchmarks passed
const (
	benchSuffix  = ".bench.txt"
	samplesDir   = "samples"
	profDir      = "prof"
	profSuffix   = ".top.txt"
	benchstatOut = "benchstat.txt"
	commandsFile = "commands.txt"
	startFile    = "start"
	loadFile     = "load-before"
	warningsFile = "warnings.txt"
)

// Load reads a run directory. procs is the GOMAXPROCS the benchmarks ran
// with (see Results.Parse). Missing optional files are skipped; it is an
// error to find no benchmark output at all.
func Load(dir string, procs int) (Input, error) {
	in := Input{Results: NewResults(), Samples: map[string][]float64{}, Profiles: map[string]string{}}
	outs, err := filepath.Glob(filepath.Join(dir, "*"+benchSuffix))
	if err != nil {
		return in, err
	}
	if len(outs) == 0 {
		return in, fmt.Errorf("benchreport: no *%s in %s", benchSuffix, dir)
	}
	slices.Sort(outs)
	for _, name := range outs {
		f, err := os.Open(name)
		if err != nil {
			return in, err
		}
		err = in.Results.Parse(f, procs)
		f.Close()
		if err != nil {
			return in, fmt.Errorf("%s: %w", name, err)
		}
	}
	samples, _ := filepath.Glob(filepath.Join(dir, samplesDir, "*.txt"))
	for _, name := range samples {
		xs, err := readSamples(name)
		if err != nil {
			return in, err
		}
		in.Samples[strings.TrimSuffix(filepath.Base(name), ".txt")] = xs
	}
	profs, _ := filepath.Glob(filepath.Join(dir, profDir, "*"+profSuffix))
	for _, name := range profs {
		b, err := os.ReadFile(name)
		if err != nil {
			return in, err
		}
		in.Profiles[strings.TrimSuffix(filepath.Base(name), profSuffix)] = string(b)
	}
	if b, err := optional(filepath.Join(dir, benchstatOut)); err != nil {
		return in, err
	} else {
		in.Benchstat = b
	}
	if b, err := optional(filepath.Join(dir, commandsFile)); err != nil {
		return in, err
	} else if b != "" {
		in.Commands = strings.Split(strings.TrimRight(b, "\n"), "\n")
	}
	if b, err := optional(filepath.Join(dir, startFile)); err != nil {
		return in, err
	} else if line := strings.TrimSpace(b); line != "" {
		in.Machine.Date = line
		if t, err := time.Parse(time.RFC3339, line); err == nil {
			in.Machine.Duration = time.Since(t)
		}
	}
	if b, err := optional(filepath.Join(dir, warningsFile)); err != nil {
		return in, err
	} else if b != "" {
		in.Warnings = strings.Split(strings.TrimRight(b, "\n"), "\n")
	}
	if b, err := optional(filepath.Join(dir, loadFile)); err != nil {
		return in, err
	} else {
		in.Machine.LoadBefore = loadAverage(b)
	}
	return in, nil
}

// optional reads a file that may be missing.
func optional(name string) (string, error) {
	b, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return string(b), err
}

// readSamples reads one number per line; blank lines are skipped.
func readSamples(name string) ([]float64, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var xs []float64
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		t := strings.TrimSpace(sc.Text())
		if t == "" {
			continue
		}
		v, err := strconv.ParseFloat(t, 64)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		xs = append(xs, v)
	}
	return xs, sc.Err()
}

// loadAverage keeps the three load averages of a /proc/loadavg line.
func loadAverage(s string) string {
	f := strings.Fields(s)
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], ", ")
}

// CPUModel returns the first "model name" of /proc/cpuinfo, or "".
func CPUModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// LoadAverageNow returns the current load averages, or "".
func LoadAverageNow() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	return loadAverage(string(b))
}

// Write writes out's Markdown to mdPath and its figures beside it.
func Write(out Output, mdPath string) error {
	dir := filepath.Dir(mdPath)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, svg := range out.Figures {
		if err := os.WriteFile(filepath.Join(dir, name), svg, 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(mdPath, out.Markdown, 0o644)
}
