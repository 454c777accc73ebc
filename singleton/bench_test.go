package singleton_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/singleton"
)

// BenchmarkRequest measures a routed request (Client.Request to a leader
// serving with Serve) against a plain NATS request to a fixed responder,
// with the same connections (one for the caller, one for the responder) and
// the same payload. It reports the p50 and p99 latency of each; the ratio
// routed/plain is the cost of routing.
//
//	go test -run '^$' -bench BenchmarkRequest -benchtime 20000x ./singleton
func BenchmarkRequest(b *testing.B) {
	for _, mode := range []string{"plain", "routed"} {
		b.Run(mode, func(b *testing.B) {
			r := newRig(b)
			payload := []byte("next")
			var do func(ctx context.Context) error
			switch mode {
			case "plain":
				srv := r.conn()
				sub, err := srv.Subscribe("bench.plain", func(m *nats.Msg) { _ = m.Respond(m.Data) })
				require.NoError(b, err)
				defer func() { _ = sub.Unsubscribe() }()
				require.NoError(b, srv.Flush())
				nc := r.conn()
				do = func(ctx context.Context) error {
					_, err := nc.RequestWithContext(ctx, "bench.plain", payload)
					return err
				}
			case "routed":
				in := r.start("a", echo("a"))
				in.leading(r.t)
				c := r.client(singleton.ClientConfig{})
				do = func(ctx context.Context) error {
					_, err := c.Request(ctx, payload)
					return err
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for range 200 { // warm up
				require.NoError(b, do(ctx))
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				if err := do(ctx); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkRequestHandover measures requests under a steady load (4
// callers, 1 s deadline each) while the leader steps down b.N times
// (Resign). It reports the requests that failed (the goal is 0), the p99
// latency of the requests that straddled a handover (sent before the step
// down, answered by the next term) and the p99 of the handovers themselves
// (Resign called to the next term answering).
//
//	go test -run '^$' -bench BenchmarkRequestHandover -benchtime 100x ./singleton
func BenchmarkRequestHandover(b *testing.B) {
	r := newRig(b)
	ins := []*instance{r.start("a", echo("a")), r.start("b", echo("b"))}
	leader := func(after uint64) *instance {
		for {
			for _, in := range ins {
				if st := in.sup.Status(); st.State == actors.StateLeading && uint64(st.Token) > after {
					return in
				}
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	leader(0)
	c := r.client(singleton.ClientConfig{})
	type sample struct {
		start, end time.Time
		token      uint64
	}
	var (
		mu      sync.Mutex
		samples []sample
		failed  atomic.Int64
		wg      sync.WaitGroup
		stop    = make(chan struct{})
	)
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				rep, err := c.Request(ctx, nil)
				cancel()
				if err != nil {
					failed.Add(1)
					continue
				}
				mu.Lock()
				samples = append(samples, sample{start, time.Now(), uint64(rep.Tenure.Token)})
				mu.Unlock()
			}
		})
	}
	var handovers, resigns []time.Duration
	var resignedAt []time.Time
	var last uint64
	b.ResetTimer()
	for b.Loop() {
		in := leader(last)
		last = uint64(in.sup.Status().Token)
		time.Sleep(10 * time.Millisecond)
		at := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := in.sup.Resign(ctx, 20*time.Millisecond); err != nil {
			b.Fatal(err)
		}
		cancel()
		resigns = append(resigns, time.Since(at))
		leader(last)
		handovers = append(handovers, time.Since(at))
		resignedAt = append(resignedAt, at)
	}
	b.StopTimer()
	close(stop)
	wg.Wait()
	var straddled []time.Duration
	for _, s := range samples {
		for _, at := range resignedAt {
			if s.start.Before(at) && s.end.After(at) {
				straddled = append(straddled, s.end.Sub(s.start))
				break
			}
		}
	}
	p99 := func(d []time.Duration) float64 {
		if len(d) == 0 {
			return 0
		}
		slices.Sort(d)
		return float64(d[len(d)*99/100].Microseconds()) / 1000
	}
	b.ReportMetric(float64(failed.Load()), "failed")
	b.ReportMetric(float64(len(samples)), "requests")
	b.ReportMetric(p99(straddled), "straddle-p99-ms")
	b.ReportMetric(p99(handovers), "handover-p99-ms")
	b.ReportMetric(p99(resigns), "resign-p99-ms")
}
