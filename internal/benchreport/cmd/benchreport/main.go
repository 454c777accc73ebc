// Command benchreport writes docs/benchmarks.md and its SVG figures from
// the measurements of one make bench run.
//
//	go run ./internal/benchreport/cmd/benchreport -dir tmp/bench -out docs/benchmarks.md
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/asterforge/aster/internal/benchreport"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("benchreport", flag.ContinueOnError)
	dir := fs.String("dir", "tmp/bench", "the run directory that make bench filled")
	out := fs.String("out", "docs/benchmarks.md", "the Markdown file to write; figures go beside it")
	procs := fs.Int("procs", runtime.GOMAXPROCS(0), "GOMAXPROCS of the benchmark run (the -N suffix of benchmark names)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	in, err := benchreport.Load(*dir, *procs)
	if err != nil {
		return err
	}
	in.Machine.CPU = benchreport.CPUModel()
	in.Machine.Cores = runtime.NumCPU()
	in.Machine.GoVersion = runtime.Version()
	in.Machine.OS, in.Machine.Arch = runtime.GOOS, runtime.GOARCH
	in.Machine.LoadAfter = benchreport.LoadAverageNow()
	report := benchreport.Build(in)
	if err := benchreport.Write(report, *out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "benchreport: wrote %s and %d figures\n", *out, len(report.Figures))
	return nil
}
