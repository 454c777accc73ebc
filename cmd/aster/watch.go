package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"slices"
	"time"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/monitor"
	"github.com/asterforge/aster/natsstore"
)

func watchFlags(fs *flag.FlagSet, c *cli) {
	bucketFlag(fs, c)
	fs.IntVar(&c.count, "count", 0, "exit after this many lines (0: until interrupted)")
}

// observationJSON is one line of `aster watch --json`.
type observationJSON struct {
	Time     time.Time         `json:"time"`
	LeaseID  string            `json:"lease_id"`
	Held     bool              `json:"held"`
	OwnerID  string            `json:"owner_id,omitempty"`
	Term     string            `json:"term,omitempty"`
	Token    uint64            `json:"token,omitempty"`
	TTL      string            `json:"ttl,omitempty"`
	Meta     map[string]string `json:"meta,omitempty"`
	Revision uint64            `json:"revision"`
	Problem  string            `json:"problem,omitempty"`
	// FreeAt is, for a key that vanished without a release, about when a
	// contender may take it: the bucket's MaxTTL after the sighting.
	FreeAt time.Time `json:"free_at,omitzero"`
	// From is the holder before this change, when it was known: the one
	// a free line says was, and a handover's previous holder.
	From *holderJSON `json:"from,omitempty"`
}

// holderJSON names a previous holder.
type holderJSON struct {
	OwnerID string `json:"owner_id"`
	Token   uint64 `json:"token"`
}

func runWatch(ctx context.Context, c *cli, args []string) error {
	id := args[0]
	if err := lease.ValidateLeaseID(id); err != nil {
		return &usageError{err.Error()}
	}
	nc, err := c.conn.connect(ctx)
	if err != nil {
		return err
	}
	defer nc.Close()
	store, err := c.conn.openStore(ctx, nc, c.bucket)
	if err != nil {
		return err
	}
	defer func() { _ = store.Close() }()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := lease.Observe(wctx, store, id)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(c.stdout)
	var prev lease.Observation
	for n := 0; c.count == 0 || n < c.count; n++ {
		o, ok := <-ch
		if !ok {
			if ctx.Err() != nil {
				return nil // interrupted
			}
			return errors.New("the watch ended: the connection to NATS was closed")
		}
		note, freeAt := vanished(wctx, c, store, o, n == 0)
		if c.json {
			line := observationOf(o, prev, n == 0)
			if note != "" {
				line.Problem, line.FreeAt = note, freeAt
			}
			if err := enc.Encode(line); err != nil {
				return err
			}
		} else {
			line := monitor.Describe(o, prev, n == 0)
			if note != "" {
				line += "; but " + note
			}
			fmt.Fprintln(c.stdout, line)
		}
		prev = o
	}
	return nil
}

// vanished says, for an observation of a free lease whose key was deleted
// or purged by hand (not released, not expired), that nobody may take it
// yet and until about when: contenders wait the bucket's MaxTTL from when
// they saw the key vanish, which is about when the watch saw it, or, for
// the first line, when the server wrote the marker. It returns "" when o is
// not such a free lease, the wait is over, or the key cannot be read.
func vanished(ctx context.Context, c *cli, store *natsstore.Store, o lease.Observation, first bool) (string, time.Time) {
	if o.Held || o.Revision == 0 {
		return "", time.Time{}
	}
	rctx, cancel := context.WithTimeout(ctx, c.conn.timeout)
	defer cancel()
	infos, err := store.Leases(rctx)
	if err != nil {
		return "", time.Time{}
	}
	i := slices.IndexFunc(infos, func(i natsstore.LeaseInfo) bool { return i.LeaseID == o.LeaseID })
	if i < 0 || infos[i].Revision != o.Revision ||
		infos[i].State != natsstore.KeyDeleted && infos[i].State != natsstore.KeyPurged {
		return "", time.Time{}
	}
	seen := o.Seen
	if first && !infos[i].Written.IsZero() {
		seen = infos[i].Written
	}
	freeAt := seen.Add(store.MaxTTL())
	if !time.Now().Before(freeAt) {
		return "", time.Time{}
	}
	return fmt.Sprintf("it was %s without a release: nobody may take it for %s, until about %s (the bucket's MaxTTL, %v)",
		infos[i].State, human(time.Until(freeAt)), freeAt.Format("15:04:05"), store.MaxTTL()), freeAt
}
