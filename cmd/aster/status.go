package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/asterforge/aster/monitor"
)

func discoveryFlags(fs *flag.FlagSet, c *cli) {
	fs.StringVar(&c.service, "service", monitor.DefaultServiceName, "the micro service's `name`")
	fs.DurationVar(&c.wait, "wait", time.Second, "how long to wait for instances to answer")
}

// instance is one process of the micro service, as its INFO answer says.
type instance struct {
	name      string // the instance metadata
	info      micro.Info
	endpoints map[string]string // subject by endpoint name
}

// discover asks every instance of the service for its INFO and collects the
// answers that arrive within c.wait, sorted by name and ID.
func discover(ctx context.Context, c *cli, nc *nats.Conn) ([]instance, error) {
	subject, err := micro.ControlSubject(micro.InfoVerb, c.service, "")
	if err != nil {
		return nil, &usageError{fmt.Sprintf("--service %q: %v", c.service, err)}
	}
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(subject, inbox, nil); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, c.wait)
	defer cancel()
	var out []instance
	for {
		m, err := sub.NextMsgWithContext(wctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			break // the wait is over
		}
		var info micro.Info
		if err := json.Unmarshal(m.Data, &info); err != nil || info.Type != micro.InfoResponseType {
			continue // not a micro service's answer
		}
		in := instance{name: info.Metadata[monitor.MetadataInstance], info: info, endpoints: map[string]string{}}
		for _, ep := range info.Endpoints {
			in.endpoints[ep.Name] = ep.Subject
		}
		out = append(out, in)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no instance of service %q answered within %v on %s (is a process serving "+
			"monitor.Registry.Service on this account? nats micro ls lists the services)", c.service, c.wait, c.conn.servers())
	}
	slices.SortFunc(out, func(a, b instance) int {
		return strings.Compare(a.name+"\x00"+a.info.ID, b.name+"\x00"+b.info.ID)
	})
	return out, nil
}

// ask requests endpoint of every instance, in parallel.
func ask(ctx context.Context, c *cli, nc *nats.Conn, ins []instance, endpoint string) []answer {
	out := make([]answer, len(ins))
	var wg sync.WaitGroup
	for i, in := range ins {
		wg.Go(func() {
			out[i] = answer{instance: in}
			subject, ok := in.endpoints[endpoint]
			if !ok {
				out[i].err = fmt.Errorf("instance %s (%s) has no %q endpoint", in.name, in.info.ID, endpoint)
				return
			}
			rctx, cancel := context.WithTimeout(ctx, c.conn.timeout)
			defer cancel()
			m, err := nc.RequestWithContext(rctx, subject, nil)
			switch {
			case err != nil:
				out[i].err = fmt.Errorf("instance %s (%s): %s: %w", in.name, in.info.ID, subject, err)
			case m.Header.Get(micro.ErrorHeader) != "":
				out[i].err = fmt.Errorf("instance %s (%s): %s", in.name, in.info.ID, m.Header.Get(micro.ErrorHeader))
			default:
				out[i].data = m.Data
			}
		})
	}
	wg.Wait()
	return out
}

type answer struct {
	instance
	data json.RawMessage
	err  error
}

// reportJSON is the part of a monitor.Report that `aster status` prints.
type reportJSON struct {
	Instance string    `json:"instance"`
	Time     time.Time `json:"time"`
	Live     bool      `json:"live"`
	Ready    bool      `json:"ready"`
	Problems []struct {
		Check   string `json:"check"`
		Subject string `json:"subject"`
		Reason  string `json:"reason"`
	} `json:"problems"`
	Leases []struct {
		LeaseID    string    `json:"lease_id"`
		State      string    `json:"state"`
		Since      time.Time `json:"since"`
		Token      uint64    `json:"token"`
		ValidUntil time.Time `json:"valid_until"`
		Stuck      int       `json:"stuck"`
		// Resumable is set while the last term has lapsed (see
		// actors.Status.ResumableUntil).
		Resumable time.Time `json:"resumable_until"`
		RetryAt   time.Time `json:"retry_at"`
		// Wait and WaitUntil say why a standby waits and until when
		// (actors.Status.Wait).
		Wait             string    `json:"wait"`
		WaitUntil        time.Time `json:"wait_until"`
		LastError        string    `json:"last_error"`
		LastErrorAt      time.Time `json:"last_error_at"`
		LastErrorCleared time.Time `json:"last_error_cleared"`
		Holder           *struct {
			OwnerID string `json:"owner_id"`
			Token   uint64 `json:"token"`
		} `json:"holder"`
	} `json:"leases"`
	Locks []struct {
		Name string `json:"name"`
		Held int    `json:"held"`
	} `json:"locks"`
	Trees []struct {
		Name string `json:"name"`
	} `json:"trees"`
	Fleets []struct {
		Prefix  string    `json:"prefix"`
		State   string    `json:"state"`
		Since   time.Time `json:"since"`
		Members []struct {
			OwnerID string `json:"owner_id"`
		} `json:"members"`
		Owned           int       `json:"owned"`
		Target          int       `json:"target"`
		Balanced        bool      `json:"balanced"`
		UnbalancedSince time.Time `json:"unbalanced_since"`
		LastError       string    `json:"last_error"`
	} `json:"fleets"`
	Stores []struct {
		Name   string `json:"name"`
		Error  string `json:"error"`
		Events []struct {
			Kind  string `json:"kind"`
			Count int64  `json:"count"`
		} `json:"events"`
	} `json:"stores"`
}

func runStatus(ctx context.Context, c *cli, _ []string) error {
	nc, err := c.conn.connect(ctx)
	if err != nil {
		return err
	}
	defer nc.Close()
	ins, err := discover(ctx, c, nc)
	if err != nil {
		return err
	}
	answers := ask(ctx, c, nc, ins, monitor.EndpointStatus)
	var errs []error
	if c.json {
		var reports []json.RawMessage
		for _, a := range answers {
			if a.err != nil {
				errs = append(errs, a.err)
				continue
			}
			reports = append(reports, a.data)
		}
		if err := printJSON(c, reports); err != nil {
			return err
		}
		return errors.Join(errs...)
	}
	w := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "INSTANCE\tID\tHEALTH\tLEASE\tSTATE\tSINCE\tTOKEN\tVALID LEFT\tHOLDER\tLAST ERROR")
	var problems []string
	for _, a := range answers {
		if a.err != nil {
			errs = append(errs, a.err)
			continue
		}
		var rep reportJSON
		if err := json.Unmarshal(a.data, &rep); err != nil {
			errs = append(errs, fmt.Errorf("instance %s (%s): %w", a.name, a.info.ID, err))
			continue
		}
		health := "ok"
		switch {
		case !rep.Live:
			health = "NOT LIVE"
		case !rep.Ready:
			health = "NOT READY"
		}
		for _, p := range rep.Problems {
			problems = append(problems, fmt.Sprintf("%s [%s] %s: %s", rep.Instance, p.Check, p.Subject, p.Reason))
		}
		lines := 0
		for _, l := range rep.Leases {
			token, valid, holder := "-", "-", "-"
			if current := l.State == "leading" || l.State == "stopping"; current {
				if l.Token != 0 {
					token = strconv.FormatUint(l.Token, 10)
				}
				if !l.ValidUntil.IsZero() {
					valid = human(l.ValidUntil.Sub(rep.Time))
				}
			}
			if l.Holder != nil {
				holder = fmt.Sprintf("%s (token %d)", l.Holder.OwnerID, l.Holder.Token)
			}
			var notes []string
			if l.Stuck > 0 {
				notes = append(notes, fmt.Sprintf("%d stuck", l.Stuck))
			}
			if left := l.Resumable.Sub(rep.Time); left > 0 {
				notes = append(notes, fmt.Sprintf("token %d lapsed, resumable for %s", l.Token, human(left)))
			}
			if w := waitNote(l.Wait, l.WaitUntil, l.RetryAt, rep.Time); w != "" && (l.Wait != "stuck" || l.Stuck == 0) {
				notes = append(notes, w)
			}
			state := l.State
			if len(notes) > 0 {
				state += " (" + strings.Join(notes, "; ") + ")"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", rep.Instance, a.info.ID, health, l.LeaseID, state,
				human(rep.Time.Sub(l.Since))+" ago", token, valid, holder,
				lastError(l.LastError, l.LastErrorAt, l.LastErrorCleared, rep.Time))
			lines++
		}
		for _, l := range rep.Locks {
			if l.Held == 0 {
				continue
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t-\t-\t-\t-\t-\n", rep.Instance, a.info.ID, health,
				"locks "+l.Name, strconv.Itoa(l.Held)+" held")
			lines++
		}
		for _, t := range rep.Trees {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t-\t-\t-\t-\t-\n", rep.Instance, a.info.ID, health, "tree "+t.Name,
				"(aster tree "+rep.Instance+")")
			lines++
		}
		for _, f := range rep.Fleets {
			balance := "balanced"
			if !f.Balanced {
				balance = "not balanced"
				if !f.UnbalancedSince.IsZero() {
					balance += " for " + human(rep.Time.Sub(f.UnbalancedSince))
				}
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t-\t-\t%s\t%s\n", rep.Instance, a.info.ID, health, "fleet "+f.Prefix,
				fmt.Sprintf("%s (runs %d of %d placed here)", f.State, f.Owned, f.Target), human(rep.Time.Sub(f.Since))+" ago",
				fmt.Sprintf("%s, %s (aster shards %s)", plural(len(f.Members), "member", "members"), balance, f.Prefix),
				dash(firstLine(f.LastError)))
			lines++
		}
		for _, st := range rep.Stores {
			state := "ok"
			if st.Error != "" {
				state = "STOPPED"
			}
			var events []string
			for _, e := range st.Events {
				events = append(events, fmt.Sprintf("%s %d", strings.TrimPrefix(e.Kind, "natsstore."), e.Count))
			}
			summary := "no events"
			if len(events) > 0 {
				summary = "events: " + strings.Join(events, ", ")
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t-\t-\t-\t%s\t%s\n", rep.Instance, a.info.ID, health, "store "+st.Name,
				state, summary, dash(firstLine(st.Error)))
			lines++
		}
		if lines == 0 {
			fmt.Fprintf(w, "%s\t%s\t%s\t-\t-\t-\t-\t-\t-\t-\n", rep.Instance, a.info.ID, health)
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(problems) > 0 {
		fmt.Fprintln(c.stdout)
		fmt.Fprintln(c.stdout, "problems:")
		for _, p := range problems {
			fmt.Fprintln(c.stdout, "  "+p)
		}
	}
	return errors.Join(errs...)
}

// treesJSON is what the tree endpoint answers.
type treesJSON struct {
	Instance string `json:"instance"`
	Trees    []struct {
		Name       string `json:"name"`
		Text       string `json:"text"`
		LeaseID    string `json:"lease_id"`
		LeaseState string `json:"lease_state"`
	} `json:"trees"`
}

func runTree(ctx context.Context, c *cli, args []string) error {
	want := args[0]
	nc, err := c.conn.connect(ctx)
	if err != nil {
		return err
	}
	defer nc.Close()
	ins, err := discover(ctx, c, nc)
	if err != nil {
		return err
	}
	var match []instance
	for _, in := range ins {
		if in.name == want || in.info.ID == want {
			match = append(match, in)
		}
	}
	switch {
	case len(match) == 0:
		var names []string
		for _, in := range ins {
			names = append(names, in.name+" ("+in.info.ID+")")
		}
		return fmt.Errorf("no instance named %q; the instances are: %s", want, strings.Join(names, ", "))
	case len(match) > 1:
		var ids []string
		for _, in := range match {
			ids = append(ids, in.info.ID)
		}
		return fmt.Errorf("%d instances are named %q; name one by its ID: %s", len(match), want, strings.Join(ids, ", "))
	}
	a := ask(ctx, c, nc, match, monitor.EndpointTree)[0]
	if a.err != nil {
		return a.err
	}
	if c.json {
		var v any
		if err := json.Unmarshal(a.data, &v); err != nil {
			return err
		}
		return printJSON(c, v)
	}
	var tr treesJSON
	if err := json.Unmarshal(a.data, &tr); err != nil {
		return fmt.Errorf("instance %s: %w", want, err)
	}
	if len(tr.Trees) == 0 {
		fmt.Fprintf(c.stdout, "%s runs no supervision tree\n", tr.Instance)
		return nil
	}
	for i, t := range tr.Trees {
		if i > 0 {
			fmt.Fprintln(c.stdout)
		}
		if t.LeaseID != "" {
			fmt.Fprintf(c.stdout, "%s: the workload of lease %s (%s here)\n", tr.Instance, t.LeaseID, t.LeaseState)
		} else {
			fmt.Fprintf(c.stdout, "%s:\n", tr.Instance)
		}
		fmt.Fprintln(c.stdout, t.Text)
	}
	return nil
}

// waitNote says why a lease supervisor waits and until when, as its
// report's wait, wait_until and retry_at say (actors.Status.Wait), relative
// to now, the report's time; "" when it does not wait.
func waitNote(wait string, until, retry, now time.Time) string {
	left := func(t time.Time) string { return human(max(t.Sub(now), 0)) }
	at := func(t time.Time) string { return t.Format("15:04:05") }
	switch wait {
	case "held":
		if until.IsZero() {
			return "held by another"
		}
		return fmt.Sprintf("holder's TTL: free in %s unless renewed", left(until))
	case "vanished":
		if until.IsZero() {
			return "key vanished without a release: nobody may take it until its last holder's TTL has run out"
		}
		return fmt.Sprintf("key vanished without a release: nobody may take it for %s, until %s", left(until), at(until))
	case "corrupt":
		note := "key holds a value that is not a lease: waits for an operator to delete it (see LAST ERROR)"
		if !retry.IsZero() {
			note += "; looks again in " + left(retry)
		}
		return note
	case "hold-off":
		return fmt.Sprintf("holding off after stepping down: %s left, until %s", left(until), at(until))
	case "backoff":
		return fmt.Sprintf("backing off after errors (see LAST ERROR): next try in %s", left(until))
	case "restart":
		return fmt.Sprintf("restart backoff after a failed term: %s left", left(until))
	case "stuck":
		return "waits for the workloads of earlier terms to stop"
	case "", "none":
		return ""
	default:
		return "waiting (" + wait + ")"
	}
}

// lastError is the LAST ERROR column: the error's first line with its age,
// marked old once a later step succeeded (actors.Status.LastErrorCleared):
// its advice may no longer apply.
func lastError(msg string, at, cleared, now time.Time) string {
	switch {
	case msg == "":
		return "-"
	case at.IsZero():
		return firstLine(msg)
	case !cleared.IsZero():
		return fmt.Sprintf("old, %s ago, cleared %s ago: %s", human(now.Sub(at)), human(now.Sub(cleared)), firstLine(msg))
	default:
		return fmt.Sprintf("%s ago: %s", human(now.Sub(at)), firstLine(msg))
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}
