package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/monitor"
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
		if c.json {
			if err := enc.Encode(observationOf(o, prev, n == 0)); err != nil {
				return err
			}
		} else {
			fmt.Fprintln(c.stdout, monitor.Describe(o, prev, n == 0))
		}
		prev = o
	}
	return nil
}
