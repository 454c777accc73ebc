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
	"github.com/asterforge/aster/natsstore"
)

func watchFlags(fs *flag.FlagSet, c *cli) {
	fs.StringVar(&c.bucket, "bucket", natsstore.DefaultBucket, "the KV `bucket` of the lease")
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
			line := observationJSON{Time: o.Seen, LeaseID: o.LeaseID, Held: o.Held, OwnerID: o.Holder.OwnerID,
				Term: o.Holder.Term, Token: uint64(o.Holder.Token), Meta: o.Holder.Meta, Revision: o.Revision}
			if o.Holder.TTL > 0 {
				line.TTL = o.Holder.TTL.String()
			}
			if o.Held && o.Holder.OwnerID == "" {
				line.Problem = "the value is not a lease; nobody can take it until it is deleted"
			}
			if err := enc.Encode(line); err != nil {
				return err
			}
		} else {
			fmt.Fprintln(c.stdout, monitor.Describe(o, prev, n == 0))
		}
		prev = o
	}
	return nil
}
