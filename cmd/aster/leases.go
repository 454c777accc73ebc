package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/asterforge/aster/monitor"
	"github.com/asterforge/aster/natsstore"
)

// leaseJSON is one line of `aster leases --json`.
type leaseJSON struct {
	LeaseID   string            `json:"lease_id"`
	State     string            `json:"state"`
	OwnerID   string            `json:"owner_id,omitempty"`
	Term      string            `json:"term,omitempty"`
	Token     uint64            `json:"token,omitempty"`
	TTL       string            `json:"ttl,omitempty"`
	Meta      map[string]string `json:"meta,omitempty"`
	Acquired  time.Time         `json:"acquired,omitzero"`
	Age       string            `json:"age,omitempty"`
	Written   time.Time         `json:"written"`
	ExpiresAt time.Time         `json:"expires_at,omitzero"`
	ValidLeft string            `json:"valid_left,omitempty"`
	Expiry    string            `json:"expiry"`
	Revision  uint64            `json:"revision"`
	Problem   string            `json:"problem,omitempty"`
}

func runLeases(ctx context.Context, c *cli, args []string) error {
	bucket := c.bucket
	if len(args) == 1 { // aster leases BUCKET: deprecated for --bucket
		if c.set["bucket"] && args[0] != c.bucket {
			return &usageError{fmt.Sprintf("the bucket is %q or %q? Name it once, with --bucket", c.bucket, args[0])}
		}
		bucket = args[0]
		fmt.Fprintf(c.stderr, "aster leases: the BUCKET argument is deprecated; use --bucket %s\n", bucket)
	}
	nc, err := c.conn.connect(ctx)
	if err != nil {
		return err
	}
	defer nc.Close()
	store, err := c.conn.openStore(ctx, nc, bucket)
	if err != nil {
		return err
	}
	defer func() { _ = store.Close() }()
	lctx, cancel := context.WithTimeout(ctx, c.conn.timeout)
	defer cancel()
	infos, err := store.Leases(lctx)
	if err != nil {
		return fmt.Errorf("list bucket %q: %w", bucket, err)
	}
	now := time.Now()
	rows := make([]leaseJSON, 0, len(infos))
	for _, i := range infos {
		rows = append(rows, leaseRow(i, store.Expiry(), now))
	}
	if c.json {
		return printJSON(c, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintf(c.stdout, "no leases in bucket %q\n", bucket)
		return nil
	}
	w := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "LEASE\tSTATE\tOWNER\tMETA\tTERM\tTOKEN\tAGE\tVALID LEFT\tEXPIRY")
	for _, r := range rows {
		state := r.State
		if r.Problem != "" {
			state += " (" + r.Problem + ")"
		}
		token := "-"
		if r.Token != 0 {
			token = strconv.FormatUint(r.Token, 10)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.LeaseID, state, dash(r.OwnerID), monitor.FormatMeta(r.Meta),
			dash(r.Term), token, dash(r.Age), dash(r.ValidLeft), r.Expiry)
	}
	return w.Flush()
}

// leaseRow describes i as printed, at now.
func leaseRow(i natsstore.LeaseInfo, mode natsstore.ExpiryMode, now time.Time) leaseJSON {
	r := leaseJSON{
		LeaseID: i.LeaseID, State: i.State.String(), OwnerID: i.Holder.OwnerID, Term: i.Holder.Term,
		Token: uint64(i.Holder.Token), Meta: i.Holder.Meta, Acquired: i.Acquired, Written: i.Written,
		ExpiresAt: i.ExpiresAt(), Expiry: mode.String(), Revision: i.Revision, Problem: i.Problem,
	}
	if i.Holder.TTL > 0 {
		r.TTL = i.Holder.TTL.String()
	}
	if !i.Acquired.IsZero() {
		r.Age = human(now.Sub(i.Acquired))
	}
	if !r.ExpiresAt.IsZero() {
		if left := r.ExpiresAt.Sub(now); left > 0 {
			r.ValidLeft = human(left)
		} else {
			r.ValidLeft = "expired " + human(-left) + " ago"
		}
	}
	return r
}

// human rounds d for people: milliseconds under a second, tenths under a
// minute, seconds above.
func human(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + human(-d)
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < 48*time.Hour:
		return d.Round(time.Second).String()
	default:
		days := d / (24 * time.Hour)
		return strconv.Itoa(int(days)) + "d" + (d - days*24*time.Hour).Round(time.Hour).String()
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func printJSON(c *cli, v any) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
