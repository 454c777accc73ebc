//go:build unix

package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestScenario runs the example once: three member processes, one killed,
// one paused, one cut off from NATS, while member a calls. The verdict must
// be PASS, unless the run took so long (a machine loaded far beyond the
// TTL's margin) that it says nothing about the code.
//
// The members run a binary built here without the race detector, as the
// chaos suite's processes are: in a member, the race detector reports
// races inside protoactor-go (its gossip state and its remote's block
// list, written and read by its goroutines unsynchronised), whatever the
// member does. This process, the scenario, store and proxies, is no member
// and runs under -race.
func TestScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("about 40 s")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the members with")
	}
	exe := filepath.Join(t.TempDir(), "grains")
	if b, err := exec.Command(goTool, "build", "-race=false", "-o", exe, ".").CombinedOutput(); err != nil {
		t.Fatalf("build the members: %v\n%s", err, b)
	}
	var out bytes.Buffer
	began := time.Now()
	err = scenario(context.Background(), &out, exe, 2*time.Second, 16)
	took := time.Since(began)
	t.Logf("\n%s(%v)", out.String(), took.Round(time.Millisecond))
	if err != nil && took > time.Minute {
		t.Skipf("%v, but the run took %v: too slow to judge", err, took)
	}
	if err != nil || !strings.Contains(out.String(), "\nPASS\n") {
		t.Fatalf("%v; want PASS", err)
	}
}
