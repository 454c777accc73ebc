package shardtest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/shard"
	"github.com/asterforge/aster/shard/shardtest"
)

// brokenStore wraps a MemStore and breaks one rule of the Directory
// contract.
type brokenStore struct {
	*shardtest.MemStore
	kind string
}

func (s *brokenStore) WatchPrefix(ctx context.Context, prefix string) ([]lease.Event, <-chan lease.Event, error) {
	if s.kind == "whole-bucket" && shard.ValidatePrefix(prefix) == nil { // the first token's leases: siblings too
		prefix = prefix[:strings.IndexByte(prefix, '.')+1]
	}
	current, ch, err := s.MemStore.WatchPrefix(ctx, prefix)
	if err != nil {
		return current, ch, err
	}
	switch s.kind {
	case "no-current":
		current = nil
	case "drop-frees":
		in, out := ch, make(chan lease.Event)
		go func() {
			defer close(out)
			for ev := range in {
				if ev.Kind == lease.EventFree {
					continue
				}
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
			}
		}()
		ch = out
	}
	return current, ch, nil
}

// The suite must be able to fail: run it against broken directories in a
// subprocess and expect the named subtests to fail.
func TestSuiteCatchesBrokenDirectories(t *testing.T) {
	for kind, wantFailing := range map[string][]string{
		"no-current":   {"CurrentListsHeldLeases"},
		"whole-bucket": {"CurrentListsHeldLeases", "OnlyThePrefix"},
		"drop-frees":   {"ChangesInOrder", "LatestOfEveryLease", "Expiry"},
	} {
		t.Run(kind, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenDirectoryHelper$", "-test.v")
			cmd.Env = append(os.Environ(), "SHARDTEST_BROKEN="+kind)
			out, err := cmd.CombinedOutput()
			require.Error(t, err, "the suite passed a directory that %s:\n%s", kind, out)
			for _, name := range wantFailing {
				assert.Contains(t, string(out), "--- FAIL: TestBrokenDirectoryHelper/"+name, "output:\n%s", out)
			}
		})
	}
}

// TestBrokenDirectoryHelper runs the suite against a broken directory when
// TestSuiteCatchesBrokenDirectories asks it to, and does nothing otherwise.
func TestBrokenDirectoryHelper(t *testing.T) {
	kind := os.Getenv("SHARDTEST_BROKEN")
	if kind == "" {
		return
	}
	shardtest.Run(t, func(t *testing.T) shardtest.Store {
		return &brokenStore{MemStore: newStore(t), kind: kind}
	}, shardtest.InVirtualTime())
}
