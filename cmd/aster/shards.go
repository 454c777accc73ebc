package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/monitor"
	"github.com/asterforge/aster/natsstore"
	"github.com/asterforge/aster/shard"
)

func shardsFlags(fs *flag.FlagSet, c *cli) {
	bucketFlag(fs, c)
	fs.StringVar(&c.shardSet, "shards", "", "the fleet's shards: `NAME:N` for NAME/0 … NAME/N-1 (shard.Range), or names "+
		"separated by commas (default: the shards with a key in the bucket)")
	fs.BoolVar(&c.live, "watch", false, "after the table, print every change of holder, and the verdict when the members "+
		"or the balance change, as it happens")
	fs.IntVar(&c.count, "count", 0, "with --watch, exit after this many changes (0: until interrupted)")
}

// fleetJSON is what `aster shards --json` prints.
type fleetJSON struct {
	Prefix string `json:"prefix"`
	Bucket string `json:"bucket"`
	Expiry string `json:"expiry"`
	// Declared says that the shards were named with --shards; otherwise
	// they are the shards with a key in the bucket.
	Declared bool         `json:"declared"`
	Shards   []shardJSON  `json:"shards"`
	Members  []memberJSON `json:"members"`
	summaryJSON
}

// summaryJSON is the verdict on a fleet's assignment.
type summaryJSON struct {
	// Members counts the held membership leases.
	MemberCount int `json:"member_count"`
	ShardCount  int `json:"shard_count"`
	// Balanced: there are members, and every shard is held by the member
	// the placement names.
	Balanced bool `json:"balanced"`
	// Moving counts the shards the placement takes from one member to give
	// to another; Free the shards nobody holds; Elsewhere the shards held
	// by an owner that is not a member.
	Moving    int `json:"moving"`
	Free      int `json:"free"`
	Elsewhere int `json:"elsewhere"`
}

// shardJSON is one shard: its lease, and the member the placement puts it
// on.
type shardJSON struct {
	Shard string `json:"shard"`
	leaseJSON
	Target string `json:"target,omitempty"`
}

// memberJSON is one membership lease (or an owner that holds shards
// without one), with the shards it holds and those placed on it.
type memberJSON struct {
	Member string `json:"member"`
	leaseJSON
	Holds  int `json:"holds"`
	Target int `json:"target"`
}

func runShards(ctx context.Context, c *cli, args []string) error {
	prefix := strings.TrimSuffix(args[0], ".")
	if err := lease.ValidateLeaseID(prefix); err != nil {
		return &usageError{"PREFIX (the fleet's shard.Config.Prefix): " + err.Error()}
	}
	declared, err := parseShardSet(prefix, c.shardSet)
	if err != nil {
		return err
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

	var current []lease.Event
	var changes <-chan lease.Event
	if c.live { // watch first, so that no change falls between the table and the watch
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		current, changes, err = store.WatchPrefix(wctx, prefix+".")
		if err != nil {
			return fmt.Errorf("watch the fleet %q in bucket %q: %w", prefix, c.bucket, err)
		}
	}
	lctx, cancel := context.WithTimeout(ctx, c.conn.timeout)
	defer cancel()
	infos, err := store.Leases(lctx)
	if err != nil {
		return fmt.Errorf("list bucket %q: %w", c.bucket, err)
	}
	f := describeFleet(prefix, declared, infos, store.Expiry(), time.Now())
	f.Bucket = c.bucket
	if len(f.Shards) == 0 && len(f.Members) == 0 {
		nothing := fmt.Sprintf("no leases of fleet %q in bucket %q (is the prefix, the bucket or the account right?)",
			prefix, c.bucket)
		if !c.live {
			return errors.New(nothing)
		}
		fmt.Fprintln(c.stderr, "aster shards: "+nothing+"; watching for its first lease")
	}
	switch {
	case c.json && c.live: // JSON lines: the fleet, then one line per change
		if err := json.NewEncoder(c.stdout).Encode(f); err != nil {
			return err
		}
	case c.json:
		return printJSON(c, f)
	default:
		if err := printFleet(c.stdout, f); err != nil {
			return err
		}
	}
	if !c.live {
		return nil
	}
	return followFleet(ctx, c, prefix, declared, current, changes)
}

// parseShardSet reads --shards: "NAME:N" or names separated by commas. It
// returns nil when spec is empty.
func parseShardSet(prefix, spec string) ([]string, error) {
	if spec == "" {
		return nil, nil
	}
	var shards []string
	if name, n, ok := strings.Cut(spec, ":"); ok {
		count, err := strconv.Atoi(n)
		if err != nil || count < 1 || name == "" {
			return nil, &usageError{fmt.Sprintf("--shards %q: NAME:N needs a name and a count of at least 1", spec)}
		}
		shards = shard.Range(name, count)
	} else {
		shards = strings.Split(spec, ",")
	}
	if err := shard.ValidateShards(prefix, shards); err != nil {
		return nil, &usageError{"--shards: " + err.Error()}
	}
	return shards, nil
}

// describeFleet assesses the fleet from the leases of the bucket, at now. A
// lease not renewed for its TTL by now (by the server's clock against
// this one's, for people only) counts as free: its holder is gone.
func describeFleet(prefix string, declared []string, infos []natsstore.LeaseInfo, mode natsstore.ExpiryMode,
	now time.Time) fleetJSON {
	shardsAt, membersAt := shard.ShardKey(prefix, ""), shard.MemberKey(prefix, "")
	var leases []lease.Event
	shardInfo, memberInfo := map[string]natsstore.LeaseInfo{}, map[string]natsstore.LeaseInfo{}
	for _, i := range infos {
		if name, ok := strings.CutPrefix(i.LeaseID, shardsAt); ok && name != "" {
			shardInfo[name] = i
		} else if name, ok := strings.CutPrefix(i.LeaseID, membersAt); ok && name != "" {
			memberInfo[name] = i
		} else {
			continue
		}
		ev := eventOf(i)
		if exp := i.ExpiresAt(); ev.Kind == lease.EventHeld && !exp.IsZero() && now.After(exp) {
			// Not renewed for its TTL: its holder is gone (a contender takes
			// it now; the server removes the key only a grace later).
			ev = lease.Event{LeaseID: i.LeaseID, Kind: lease.EventFree, Revision: i.Revision}
		}
		leases = append(leases, ev)
	}
	shards := declared
	if shards == nil {
		shards = slices.Collect(maps.Keys(shardInfo))
	}
	shards = unique(shards)
	a := shard.Assess(prefix, shards, leases)
	f := fleetJSON{Prefix: prefix, Expiry: mode.String(), Declared: declared != nil}

	// Every shard declared or seen (undeclared shards have no target), in
	// the order people count them: tenant/2 before tenant/10.
	names := unique(append(slices.Clone(shards), slices.Collect(maps.Keys(shardInfo))...))
	slices.SortStableFunc(names, naturalCompare)
	for _, name := range names {
		row := shardJSON{Shard: name, Target: a.Placement[name]}
		if i, ok := shardInfo[name]; ok {
			row.leaseJSON = leaseRow(i, mode, now)
		} else {
			row.leaseJSON = leaseJSON{LeaseID: shard.ShardKey(prefix, name), State: "empty", Expiry: mode.String()}
		}
		f.Shards = append(f.Shards, row)
	}

	holds, targets := map[string]int{}, map[string]int{}
	for _, o := range a.Holders {
		holds[o]++
	}
	for _, m := range a.Placement {
		targets[m]++
	}
	listed := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(memberInfo)) {
		i := memberInfo[name]
		owner := name
		if i.State == natsstore.KeyHeld && i.Holder.OwnerID != "" {
			owner = i.Holder.OwnerID
		}
		listed[owner] = true
		f.Members = append(f.Members, memberJSON{Member: owner, leaseJSON: leaseRow(i, mode, now),
			Holds: holds[owner], Target: targets[owner]})
	}
	for _, owner := range slices.Sorted(maps.Keys(holds)) {
		if !listed[owner] {
			f.Members = append(f.Members, memberJSON{Member: owner,
				leaseJSON: leaseJSON{LeaseID: shard.MemberKey(prefix, owner), State: "empty", Expiry: mode.String()},
				Holds:     holds[owner]})
		}
	}
	f.summaryJSON = summarize(a, shards)
	return f
}

// eventOf is the event a Directory reports for a key in the state i: held
// (a value that is not a lease is held by nobody known), or free.
func eventOf(i natsstore.LeaseInfo) lease.Event {
	switch i.State {
	case natsstore.KeyHeld:
		return lease.Event{LeaseID: i.LeaseID, Kind: lease.EventHeld, Holder: i.Holder, Revision: i.Revision}
	case natsstore.KeyCorrupt:
		return lease.Event{LeaseID: i.LeaseID, Kind: lease.EventHeld, Revision: i.Revision}
	}
	return lease.Event{LeaseID: i.LeaseID, Kind: lease.EventFree, Revision: i.Revision}
}

func summarize(a shard.Assignment, shards []string) summaryJSON {
	// No members: nothing is placed, and nothing is balanced.
	s := summaryJSON{MemberCount: len(a.Members), ShardCount: len(shards), Balanced: a.Balanced && len(a.Members) > 0,
		Moving: a.Moving}
	for _, name := range shards {
		h, held := a.Holders[name]
		switch {
		case !held:
			s.Free++
		case !slices.Contains(a.Members, h):
			s.Elsewhere++
		}
	}
	return s
}

func (s summaryJSON) String() string {
	head := plural(s.MemberCount, "member", "members") + ", " + plural(s.ShardCount, "shard", "shards") + ": "
	switch {
	case s.ShardCount == 0:
		return head + "nothing to place"
	case s.MemberCount == 0:
		return head + "no members: nothing is placed"
	case s.Balanced:
		return head + "balanced"
	}
	var why []string
	if s.Moving > 0 {
		why = append(why, plural(s.Moving, "shard moves", "shards move")+" to another member")
	}
	if s.Free > 0 {
		why = append(why, plural(s.Free, "shard is", "shards are")+" free")
	}
	if s.Elsewhere > 0 {
		why = append(why, plural(s.Elsewhere, "shard is", "shards are")+" held by an owner that is not a member")
	}
	if len(why) == 0 {
		return head + "not balanced"
	}
	return head + "not balanced: " + strings.Join(why, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// maxMisplaced bounds the shards listed under an unbalanced verdict.
const maxMisplaced = 20

func printFleet(out io.Writer, f fleetJSON) error {
	if len(f.Shards) == 0 && len(f.Members) == 0 {
		return nil // runShards said so
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "SHARD\tSTATE\tHOLDER\tMETA\tTOKEN\tAGE\tVALID LEFT\tTARGET")
	for _, r := range f.Shards {
		holder, meta, token := "-", "-", "-"
		if r.State == natsstore.KeyHeld.String() {
			holder, meta, token = dash(r.OwnerID), monitor.FormatMeta(r.Meta), strconv.FormatUint(r.Token, 10)
		}
		target := dash(r.Target)
		if r.Target != "" && holder != r.Target {
			target += " *"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Shard, stateText(r.leaseJSON), holder, meta, token,
			dash(r.Age), dash(r.ValidLeft), target)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "MEMBER\tSTATE\tMETA\tHOLDS\tTARGET\tAGE\tVALID LEFT")
	for _, r := range f.Members {
		meta := "-"
		if r.State == natsstore.KeyHeld.String() {
			meta = monitor.FormatMeta(r.Meta)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", r.Member, memberState(r), meta, r.Holds, r.Target,
			dash(r.Age), dash(r.ValidLeft))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, f.summaryJSON.String())
	if !f.Balanced && f.MemberCount > 0 {
		n := 0
		for _, r := range f.Shards {
			if r.Target == "" || r.State == natsstore.KeyHeld.String() && r.OwnerID == r.Target {
				continue
			}
			if n++; n > maxMisplaced {
				continue
			}
			from := "free"
			if r.State == natsstore.KeyHeld.String() {
				from = dash(r.OwnerID)
			}
			fmt.Fprintf(out, "  %s: %s -> %s\n", r.Shard, from, r.Target)
		}
		if n > maxMisplaced {
			fmt.Fprintf(out, "  and %d more (--json lists every shard)\n", n-maxMisplaced)
		}
	}
	if !f.Declared {
		fmt.Fprintln(out, "(the shards with a key in the bucket; a shard never held has none: name them with --shards)")
	}
	return nil
}

// stateText is a lease's state, with the reason when it is not a lease.
func stateText(r leaseJSON) string {
	if r.Problem != "" {
		return r.State + " (" + r.Problem + ")"
	}
	return r.State
}

// memberState says what a membership lease's state means.
func memberState(r memberJSON) string {
	switch r.State {
	case natsstore.KeyHeld.String():
		return "member"
	case natsstore.KeyReleased.String():
		return "left"
	case natsstore.KeyExpired.String():
		return "expired"
	case "empty":
		return "not a member"
	}
	return stateText(r.leaseJSON)
}

// fleetChangeJSON is one line of `aster shards --watch --json`: a change of
// a lease's holder, with the fleet's verdict after it.
type fleetChangeJSON struct {
	observationJSON
	Kind string `json:"kind"` // "shard" or "member"
	Name string `json:"name"` // the shard, or the member's OwnerID
	summaryJSON
}

// followFleet prints every change of holder under the prefix, and the
// verdict whenever the members or the balance change, until ctx ends or
// after --count changes. A lease the watch has not seen written for its TTL
// counts as free from then on, as it does for the Hosts and their
// contenders (its holder is gone; the server removes the key only a grace
// later).
func followFleet(ctx context.Context, c *cli, prefix string, declared []string, current []lease.Event,
	changes <-chan lease.Event) error {
	shardsAt, membersAt := shard.ShardKey(prefix, ""), shard.MemberKey(prefix, "")
	state := map[string]lease.Event{}
	written := map[string]time.Time{} // when the watch last showed each held lease written
	now := time.Now()
	for _, ev := range current {
		state[ev.LeaseID] = ev
		written[ev.LeaseID] = now
	}
	shardSet := func() []string {
		if declared != nil {
			return declared
		}
		var out []string
		for id := range state {
			if name, ok := strings.CutPrefix(id, shardsAt); ok && name != "" {
				out = append(out, name)
			}
		}
		return out
	}
	assess := func() summaryJSON {
		shards := unique(shardSet())
		return summarize(shard.Assess(prefix, shards, slices.Collect(maps.Values(state))), shards)
	}
	// expired returns the held leases not written for their TTL by now,
	// as events that free them.
	expired := func(now time.Time) []lease.Event {
		var out []lease.Event
		for _, id := range slices.Sorted(maps.Keys(state)) {
			ev := state[id]
			if ttl := ev.Holder.TTL; ev.Kind == lease.EventHeld && ev.Holder.Session == "" && ttl > 0 &&
				now.Sub(written[id]) > ttl {
				out = append(out, lease.Event{LeaseID: id, Kind: lease.EventFree, Revision: ev.Revision})
			}
		}
		return out
	}
	tick := time.NewTicker(fleetAgeCheck)
	defer tick.Stop()
	verdict := assess()
	enc := json.NewEncoder(c.stdout)
	for n := 0; c.count == 0 || n < c.count; {
		var evs []lease.Event
		select {
		case ev, ok := <-changes:
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return errors.New("the watch ended: the connection to NATS was closed")
			}
			if ev.Kind == lease.EventHeld {
				written[ev.LeaseID] = time.Now()
			}
			evs = append(evs, ev)
		case now := <-tick.C:
			evs = expired(now)
		case <-ctx.Done():
			return nil // interrupted
		}
		for _, ev := range evs {
			if c.count != 0 && n >= c.count {
				break
			}
			prev, known := state[ev.LeaseID]
			state[ev.LeaseID] = ev
			kind, name := "shard", ""
			if n, ok := strings.CutPrefix(ev.LeaseID, shardsAt); ok && n != "" {
				name = n
			} else if n, ok := strings.CutPrefix(ev.LeaseID, membersAt); ok && n != "" {
				kind, name = "member", n
			} else {
				continue
			}
			o, p := observe(ev), observe(prev)
			if known && sameHolder(o, p) || !known && !o.Held {
				continue // a renewal, the same state again after a reconnect, a key not held freed
			}
			n++
			after := assess()
			var err error
			switch {
			case c.json:
				err = enc.Encode(fleetChangeJSON{observationJSON: observationOf(o, p, !known), Kind: kind, Name: name,
					summaryJSON: after})
			case after.Balanced != verdict.Balanced || after.MemberCount != verdict.MemberCount:
				_, err = fmt.Fprintf(c.stdout, "%s\n%s  %s\n", monitor.Describe(o, p, false), o.Seen.Format("15:04:05.000"), after)
			default:
				_, err = fmt.Fprintln(c.stdout, monitor.Describe(o, p, false))
			}
			if err != nil {
				return err
			}
			verdict = after
		}
	}
	return nil
}

// fleetAgeCheck is how often aster shards --watch looks for leases not
// written for their TTL.
const fleetAgeCheck = 250 * time.Millisecond

// observe is the observation of an event, seen now.
func observe(ev lease.Event) lease.Observation {
	o := lease.Observation{LeaseID: ev.LeaseID, Revision: ev.Revision, Seen: time.Now()}
	if ev.Kind == lease.EventHeld {
		o.Held, o.Holder = true, ev.Holder
	}
	return o
}

// sameHolder reports whether o and p are the same tenure (a renewal does
// not change it).
func sameHolder(o, p lease.Observation) bool {
	return o.Held == p.Held && o.Holder.OwnerID == p.Holder.OwnerID && o.Holder.Term == p.Holder.Term &&
		o.Holder.Token == p.Holder.Token
}

// observationOf is the JSON line of o, seen after prev (first: o is the
// first observation, and prev means nothing). It names the previous holder
// where monitor.Describe does: a lease freed, and a handover.
func observationOf(o, prev lease.Observation, first bool) observationJSON {
	line := observationJSON{Time: o.Seen, LeaseID: o.LeaseID, Held: o.Held, OwnerID: o.Holder.OwnerID,
		Term: o.Holder.Term, Token: uint64(o.Holder.Token), Meta: o.Holder.Meta, Revision: o.Revision}
	if o.Holder.TTL > 0 {
		line.TTL = o.Holder.TTL.String()
	}
	if o.Held && o.Holder.OwnerID == "" {
		line.Problem = "the value is not a lease; nobody can take it until it is deleted, and then for the bucket's MaxTTL"
	}
	if !first && prev.Held && prev.Holder.OwnerID != "" {
		line.From = &holderJSON{OwnerID: prev.Holder.OwnerID, Token: uint64(prev.Holder.Token)}
	}
	return line
}

// unique returns the sorted distinct elements of ss.
func unique(ss []string) []string {
	out := slices.Clone(ss)
	slices.Sort(out)
	return slices.Compact(out)
}

// naturalCompare orders names as people count them: runs of digits by
// their value ("tenant/2" before "tenant/10"), the rest byte by byte.
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digits(a), digits(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if c := cmp.Compare(len(na), len(nb)); c != 0 {
				return c
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

// digits returns the length of the run of ASCII digits s begins with.
func digits(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}
