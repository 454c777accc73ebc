package singleton_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

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
