//go:build unix

package main

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/asterforge/aster/examples/internal/demo"
	"github.com/asterforge/aster/natsstore"
	"github.com/asterforge/aster/singleton"
)

// callerArg is the hidden first argument of a caller process.
const callerArg = "__caller"

// issued is what a caller reports for each number it was given.
type issued struct {
	Caller   string        `json:"caller"`
	Number   uint64        `json:"number"`
	ID       string        `json:"id"`
	Token    uint64        `json:"token"`
	Attempts int           `json:"attempts"`
	Took     time.Duration `json:"took"`
	Err      string        `json:"err,omitempty"`
}

// callerMain asks for -numbers numbers, one after another, and reports each.
func callerMain(args []string) int {
	fs := flag.NewFlagSet("scheduler "+callerArg, flag.ContinueOnError)
	name := fs.String("name", "c1", "")
	urls := fs.String("nats-url", "", "")
	numbers := fs.Int("numbers", defaultNumbers, "")
	every := fs.Duration("every", 50*time.Millisecond, "")
	replicas := fs.Int("replicas", 1, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log := demo.NewLogger(os.Stderr, true).With("caller", *name)
	ctx, stop := demo.ChildContext()
	defer stop()
	list := strings.Split(*urls, ",")
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	store, err := natsstore.Dial(dctx, natsstore.DialOptions{URLs: list, Name: *name}, natsstore.Config{Bucket: bucket, Replicas: *replicas})
	cancel()
	if err != nil {
		log.Error("caller failed", "error", err)
		return 1
	}
	defer store.Close()
	nc, err := nats.Connect(*urls, nats.Name(*name+"-requests"))
	if err != nil {
		log.Error("caller failed", "error", err)
		return 1
	}
	defer nc.Close()
	c, err := singleton.NewClient(nc, singleton.ClientConfig{LeaseID: leaseID, Watcher: store, AttemptTimeout: time.Second})
	if err != nil {
		log.Error("caller failed", "error", err)
		return 1
	}
	defer c.Close()
	failed := 0
	for range *numbers {
		start := time.Now()
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		rep, err := c.Request(rctx, []byte("next"))
		cancel()
		rec := issued{Caller: *name, Took: time.Since(start)}
		if err != nil {
			if ctx.Err() != nil {
				return 0
			}
			failed++
			rec.Err = err.Error()
			log.Warn("no number", "error", err)
		} else {
			rec.Number, _ = strconv.ParseUint(string(rep.Data), 10, 64)
			rec.ID, rec.Token, rec.Attempts = rep.ID, uint64(rep.Tenure.Token), rep.Attempts
		}
		b, _ := json.Marshal(rec)
		_ = nc.Publish(issuedSubject, b)
		select {
		case <-ctx.Done():
			return 0
		case <-time.After(*every):
		}
	}
	_ = nc.Flush()
	if failed > 0 {
		return 1
	}
	return 0
}
