//go:build unix

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/examples/internal/demo"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
	"github.com/asterforge/aster/singleton"
	"github.com/asterforge/aster/supervision"
)

// sequencerArg is the hidden first argument of a sequencer process.
const sequencerArg = "__sequencer"

// counterKey is the KV key of the next number.
const counterKey = "counter"

// counter is the value under counterKey: the last number handed out, and
// the tenure that wrote it (the fence).
type counter struct {
	Last  uint64 `json:"last"`
	Token uint64 `json:"token"`
	Term  string `json:"term"`
}

// sequencerMain runs one sequencer instance until SIGTERM.
func sequencerMain(args []string) int {
	fs := flag.NewFlagSet("scheduler "+sequencerArg, flag.ContinueOnError)
	name := fs.String("name", "s1", "")
	urls := fs.String("nats-url", "", "")
	ttl := fs.Duration("ttl", defaultTTL, "")
	replicas := fs.Int("replicas", 1, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log := demo.NewLogger(os.Stderr, true).With("instance", *name)
	ctx, stop := demo.ChildContext()
	defer stop()
	if err := runSequencer(ctx, *name, strings.Split(*urls, ","), *ttl, *replicas, log); err != nil {
		log.Error("sequencer failed", "error", err)
		return 1
	}
	return 0
}

func runSequencer(ctx context.Context, name string, urls []string, ttl time.Duration, replicas int, log *slog.Logger) error {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	store, err := natsstore.Dial(dctx, natsstore.DialOptions{URLs: urls, Name: name}, natsstore.Config{Bucket: bucket, Replicas: replicas})
	if err != nil {
		return err
	}
	defer store.Close()
	nc, err := nats.Connect(strings.Join(urls, ","), nats.Name(name+"-serve"))
	if err != nil {
		return err
	}
	defer nc.Close()
	kv, err := dataKV(dctx, nc, replicas)
	if err != nil {
		return err
	}
	handle := singleton.Dedupe(singleton.NewKVIDStore(kv), next(kv))
	sup, err := actors.NewLeaseSupervisor(actors.SupervisorConfig{
		Lease: lease.Config{LeaseID: leaseID, OwnerID: name, TTL: ttl, StandbyRetryInterval: ttl},
		Store: store,
		Meta:  map[string]string{"instance": name},
		Workload: actors.WorkloadFunc(func(ctx context.Context, token lease.Token) error {
			log.Info("leading: serving numbers", "token", token)
			return singleton.Serve(ctx, nc, singleton.ServeConfig{DrainTimeout: ttl / 10}, handle)
		}),
		Restart: actors.RestartPolicy{Backoff: supervision.Backoff{Base: 50 * time.Millisecond, Cap: time.Second},
			Intensity: supervision.Unlimited},
		Logger: log,
	})
	if err != nil {
		return err
	}
	return sup.Run(ctx)
}

// dataKV binds to (or creates, with replicas replicas) the bucket of the
// counter and the request IDs. IDs are forgotten after an hour. A bucket
// that exists is used as it is, as natsstore does with the lease bucket:
// its replicas are not changed.
func dataKV(ctx context.Context, nc *nats.Conn, replicas int) (jetstream.KeyValue, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: dataBucket, TTL: time.Hour,
		Storage: jetstream.FileStorage, Replicas: max(replicas, 1)})
	if errors.Is(err, jetstream.ErrBucketExists) {
		kv, err = js.KeyValue(ctx, dataBucket)
	}
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", dataBucket, err)
	}
	return kv, nil
}

// next hands out the next number: it reads the counter and writes it back
// incremented with a compare-and-swap on its revision, and only if the
// counter was last written by this tenure or an older one (the fence: a
// term that lost its lease, paused or partitioned, cannot write after a
// newer one did).
func next(kv jetstream.KeyValue) singleton.Handler {
	return func(ctx context.Context, req *singleton.Request) ([]byte, error) {
		for range 16 {
			var cur counter
			var rev uint64
			switch e, err := kv.Get(ctx, counterKey); {
			case errors.Is(err, jetstream.ErrKeyNotFound):
			case err != nil:
				return nil, err
			default:
				if err := json.Unmarshal(e.Value(), &cur); err != nil {
					return nil, fmt.Errorf("the counter holds %q: %w", e.Value(), err)
				}
				rev = e.Revision()
			}
			t := req.Tenure
			if lease.Token(cur.Token) > t.Token || lease.Token(cur.Token) == t.Token && cur.Term != t.Term {
				return nil, fmt.Errorf("fenced: the counter was written by a newer term (token %d > %d)", cur.Token, t.Token)
			}
			nv := counter{Last: cur.Last + 1, Token: uint64(t.Token), Term: t.Term}
			b, _ := json.Marshal(nv)
			var err error
			if rev == 0 {
				_, err = kv.Create(ctx, counterKey, b)
			} else {
				_, err = kv.Update(ctx, counterKey, b, rev)
			}
			var apiErr *jetstream.APIError
			if errors.Is(err, jetstream.ErrKeyExists) || errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
				continue // written meanwhile: read it again
			}
			if err != nil {
				return nil, err
			}
			return []byte(strconv.FormatUint(nv.Last, 10)), nil
		}
		return nil, errors.New("the counter kept changing")
	}
}
