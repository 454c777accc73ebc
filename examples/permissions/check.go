package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/monitor"
	"github.com/asterforge/aster/natsstore"
)

// Check starts nats-server in the process, in topology top, and proves the
// permissions of bucket: a user with all of them (the bucket's creation
// included) uses a lease fully and its watch keeps up with several MiB of
// updates; so does a user with the required ones only, on the existing
// bucket (its Close included); and a user without any one of the
// permissions marked Refused (or without its inbox) is refused with
// natsstore.ErrPermission.
func Check(ctx context.Context, bucket string, top natstest.Topology, out io.Writer) error {
	return check(ctx, bucket, top, out, "")
}

// check is Check, with the subject omit left out of the minimal user's
// permissions (to show that the check notices).
func check(ctx context.Context, bucket string, top natstest.Topology, out io.Writer, omit string) error {
	pub, sub := natstest.Permissions(bucket, top)
	users := []string{
		user("service", subjects(pub, func(natstest.Permission) bool { return true }), sub),
		user("minimal", subjects(pub, func(p natstest.Permission) bool { return !p.Create && p.Subject != omit }), sub),
		// May subscribe to one unrelated subject only (an empty list would
		// allow everything).
		user("without-inbox", subjects(pub, func(p natstest.Permission) bool { return !p.Create }), []string{"unrelated"}),
	}
	var refused []string
	for _, p := range pub {
		if p.Refused {
			refused = append(refused, p.Subject)
			users = append(users, user("without-"+p.Subject,
				subjects(pub, func(q natstest.Permission) bool { return !q.Create && q != p }), sub))
		}
	}
	e, err := start(bucket, top, strings.Join(users, ",\n"))
	if err != nil {
		return err
	}
	defer e.close()

	for _, u := range []string{"service", "minimal"} {
		if err := e.useLease(ctx, u); err != nil {
			return fmt.Errorf("user %s: %w", u, err)
		}
		fmt.Fprintf(out, "ok: %-8s opens bucket %s, acquires, renews, releases and watches a lease, "+
			"and its watch keeps up with %d MiB of updates\n", u, bucket, floodCount*floodSize>>20)
	}
	for _, s := range append(refused, top.Inbox()+".>") {
		u, what := "without-"+s, "without "+s
		if s == top.Inbox()+".>" {
			u, what = "without-inbox", "without subscribing to "+s
		}
		err := e.useLease(ctx, u)
		if !errors.Is(err, natsstore.ErrPermission) {
			return fmt.Errorf("%s: want natsstore.ErrPermission, got %v", what, err)
		}
		fmt.Fprintf(out, "ok: %s: refused with natsstore.ErrPermission\n", what)
	}
	return nil
}

// subjects returns the subjects of the permissions keep accepts.
func subjects(pub []natstest.Permission, keep func(natstest.Permission) bool) []string {
	var out []string
	for _, p := range pub {
		if keep(p) {
			out = append(out, p.Subject)
		}
	}
	return out
}

// user renders a user with password "pw" as nats-server configuration.
func user(name string, publish, subscribe []string) string {
	quote := func(ss []string) string {
		q := make([]string, len(ss))
		for i, s := range ss {
			q[i] = fmt.Sprintf("%q", s)
		}
		return strings.Join(q, ", ")
	}
	return fmt.Sprintf(`{user: %q, password: "pw", permissions: {publish: {allow: [%s]}, subscribe: {allow: [%s]}}}`,
		name, quote(publish), quote(subscribe))
}

// env is a topology of servers in the process, and how its service
// connects.
type env struct {
	url     string
	cfg     natsstore.Config
	inbox   string
	servers []*server.Server
	dirs    []string
}

const exporter = "JS" // the account that holds the bucket, with -api-prefix

// start starts the servers of top, with users (nats-server configuration)
// where the service connects.
func start(bucket string, top natstest.Topology, users string) (*env, error) {
	e := &env{cfg: natsstore.Config{Bucket: bucket, Domain: top.Domain, APIPrefix: top.APIPrefix,
		CloseTimeout: closeTimeout}, inbox: top.InboxPrefix}
	var conf string
	switch {
	case top.APIPrefix != "":
		exports, imports := natstest.CrossAccount(bucket, exporter, top, true)
		conf = fmt.Sprintf("accounts {\n  %s: { jetstream: enabled, exports: [%s] }\n  SVC: { users: [%s], imports: [%s] }\n}\n",
			exporter, strings.Join(exports, ", "), users, strings.Join(imports, ", "))
	default:
		conf = "authorization { users: [" + users + "] }\n"
	}
	domain := top.Domain
	var remote *url.URL
	if top.Leaf {
		// The hub holds the bucket, in the domain; the service connects to
		// a leaf node with a JetStream of its own.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if _, err := e.server("aster-permissions-hub", "", top.Domain, func(o *server.Options) {
			o.LeafNode.Host, o.LeafNode.Port = "127.0.0.1", port
		}); err != nil {
			e.close()
			return nil, err
		}
		remote = &url.URL{Scheme: "nats-leaf", Host: fmt.Sprintf("127.0.0.1:%d", port)}
		domain = "leaf"
	}
	srv, err := e.server("aster-permissions", conf, domain, func(o *server.Options) {
		if remote != nil {
			o.LeafNode.Remotes = []*server.RemoteLeafOpts{{URLs: []*url.URL{remote}}}
		}
	})
	if err != nil {
		e.close()
		return nil, err
	}
	e.url = srv.ClientURL()
	if remote != nil {
		deadline := time.Now().Add(10 * time.Second)
		for srv.NumLeafNodes() == 0 {
			if time.Now().After(deadline) {
				e.close()
				return nil, errors.New("the leaf node did not connect to the hub")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return e, nil
}

// server starts one server with JetStream and configuration conf.
func (e *env) server(name, conf, domain string, edit func(*server.Options)) (*server.Server, error) {
	dir, err := os.MkdirTemp("", "aster-permissions-")
	if err != nil {
		return nil, err
	}
	e.dirs = append(e.dirs, dir)
	o := &server.Options{}
	if conf != "" {
		if err := o.ProcessConfigString(conf); err != nil {
			return nil, fmt.Errorf("server configuration: %w\n%s", err, conf)
		}
	}
	o.ServerName, o.Host, o.Port = name, "127.0.0.1", server.RANDOM_PORT
	o.JetStream, o.JetStreamDomain, o.StoreDir = true, domain, dir
	o.NoLog, o.NoSigs = true, true
	edit(o)
	srv, err := server.NewServer(o)
	if err != nil {
		return nil, err
	}
	srv.Start()
	e.servers = append(e.servers, srv)
	if !srv.ReadyForConnections(10 * time.Second) {
		return nil, fmt.Errorf("nats-server %s not ready", name)
	}
	return srv, nil
}

func (e *env) close() {
	for i := len(e.servers) - 1; i >= 0; i-- {
		e.servers[i].Shutdown()
		e.servers[i].WaitForShutdown()
	}
	for _, d := range e.dirs {
		os.RemoveAll(d)
	}
}

// closeTimeout bounds Store.Close in the check.
const closeTimeout = time.Second

// The scratch traffic: more than the 2 MiB after which a watch without
// flow control stalls.
const (
	floodSize  = 64 << 10
	floodCount = 96
	// floodWait bounds the wait for the watch to see the last update after
	// it was written.
	floodWait = 5 * time.Second
)

// useLease has user open the bucket (the first user creates it), watch a
// lease, acquire, renew and release it, and see the release through the
// watch; then watch a scratch key while the same user writes several MiB
// of updates to it.
func (e *env) useLease(ctx context.Context, user string) (err error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	// The store re-creates a watch that stalls: a stall is seen by its
	// event, not by a watch that never catches up.
	var stalled atomic.Pointer[natsstore.WatchStalled]
	cfg := e.cfg
	cfg.OnEvent = func(ev natsstore.Event) {
		if s, ok := ev.(natsstore.WatchStalled); ok {
			stalled.CompareAndSwap(nil, &s)
		}
	}
	store, err := natsstore.Dial(ctx, natsstore.DialOptions{URLs: []string{e.url}, User: user, Password: "pw",
		InboxPrefix: e.inbox}, cfg)
	if err != nil {
		return err
	}
	defer func() {
		if s := stalled.Load(); s != nil && err == nil {
			err = fmt.Errorf("the watch stalled (%s) and had to be re-created: is the flow control subject "+
				"$JS.FC.KV_%s.> allowed?", s.Cause, e.cfg.Bucket)
		}
	}()
	defer func() { err = errors.Join(err, store.Close()) }()
	events, err := store.Watch(ctx, "permissions.check")
	if err != nil {
		return err
	}
	a, err := store.Acquire(ctx, lease.Claim{LeaseID: "permissions.check", OwnerID: user, Term: lease.NewTerm(), TTL: 5 * time.Second})
	if err != nil {
		return err
	}
	if !a.Acquired {
		return fmt.Errorf("not acquired: held by %q", a.Holder.OwnerID)
	}
	l, err := store.Renew(ctx, a.Lease)
	if err != nil {
		return err
	}
	if err := store.Release(ctx, l); err != nil {
		return err
	}
	if err := seen(ctx, events, l.Revision+1, func(ev lease.Event) bool { return ev.Kind == lease.EventFree }); err != nil {
		return fmt.Errorf("the watch did not report the release: %w", err)
	}
	return e.flood(ctx, store, user)
}

// flood writes floodCount updates of floodSize bytes to a scratch key as
// user, and checks that a watch of store sees the last one.
func (e *env) flood(ctx context.Context, store *natsstore.Store, user string) error {
	opts := []nats.Option{nats.UserInfo(user, "pw")}
	if e.inbox != "" {
		opts = append(opts, nats.CustomInboxPrefix(e.inbox))
	}
	nc, err := nats.Connect(e.url, opts...)
	if err != nil {
		return err
	}
	defer nc.Close()
	var js jetstream.JetStream
	switch {
	case e.cfg.Domain != "":
		js, err = jetstream.NewWithDomain(nc, e.cfg.Domain)
	case e.cfg.APIPrefix != "":
		js, err = jetstream.NewWithAPIPrefix(nc, e.cfg.APIPrefix)
	default:
		js, err = jetstream.New(nc)
	}
	if err != nil {
		return err
	}
	kv, err := js.KeyValue(ctx, e.cfg.Bucket)
	if err != nil {
		return err
	}
	key := "permissions.scratch." + user
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, err := store.Watch(wctx, key)
	if err != nil {
		return err
	}
	var last uint64
	for range floodCount {
		if last, err = kv.Put(ctx, key, make([]byte, floodSize)); err != nil {
			return fmt.Errorf("write the scratch key: %w", err)
		}
	}
	fctx, fcancel := context.WithTimeout(ctx, floodWait)
	defer fcancel()
	if err := seen(fctx, events, last, func(lease.Event) bool { return true }); err != nil {
		return fmt.Errorf("the watch stalled before the last of %d updates of %d KiB (is the flow control "+
			"subject $JS.FC.KV_%s.> allowed?): %w", floodCount, floodSize>>10, e.cfg.Bucket, err)
	}
	return nil
}

// seen waits for an event at revision rev or later that match accepts.
func seen(ctx context.Context, events <-chan lease.Event, rev uint64, match func(lease.Event) bool) error {
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return errors.New("the watch ended")
			}
			if ev.Revision >= rev && match(ev) {
				return nil
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// CheckMonitor proves the monitor's permissions in the plain topology: a
// service user with the store's minimal permissions and the monitor's
// registers the micro service, and an operator with the operator's
// permissions only finds it and reads its status; a service user without
// them cannot register it.
func CheckMonitor(ctx context.Context, bucket string, top natstest.Topology, out io.Writer) error {
	if top != (natstest.Topology{}) {
		return errors.New("-monitor with -check proves the plain topology only")
	}
	pub, sub := natstest.Permissions(bucket, top)
	svcPub, svcSub, opPub, opSub := natstest.MonitorPermissions(monitor.DefaultServiceName, top.Inbox())
	minimal := subjects(pub, func(p natstest.Permission) bool { return !p.Create })
	users := strings.Join([]string{
		user("service", append(subjects(pub, func(natstest.Permission) bool { return true }), svcPub...), append(sub, svcSub...)),
		user("operator", opPub, opSub),
		user("without-monitor", minimal, sub),
	}, ",\n")
	e, err := start(bucket, top, users)
	if err != nil {
		return err
	}
	defer e.close()
	connect := func(name string) (*nats.Conn, error) {
		return nats.Connect(e.url, nats.UserInfo(name, "pw"), nats.Name(name))
	}
	svcConn, err := connect("service")
	if err != nil {
		return err
	}
	defer svcConn.Close()
	reg := monitor.New(monitor.Config{Instance: "checked"})
	svc, err := reg.Service(svcConn, monitor.ServiceConfig{})
	if err != nil {
		return fmt.Errorf("user service: %w", err)
	}
	defer func() { _ = svc.Stop() }()
	op, err := connect("operator")
	if err != nil {
		return err
	}
	defer op.Close()
	info, err := op.Request("$SRV.INFO."+monitor.DefaultServiceName, nil, 2*time.Second)
	if err != nil {
		return fmt.Errorf("operator: the service's info: %w", err)
	}
	var described struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(info.Data, &described); err != nil || described.ID == "" {
		return fmt.Errorf("operator: the service's info: %q", info.Data)
	}
	if _, err := op.Request(monitor.DefaultServiceName+"."+described.ID+"."+monitor.EndpointStatus, nil, 2*time.Second); err != nil {
		return fmt.Errorf("operator: the service's status: %w", err)
	}
	fmt.Fprintln(out, "ok: service registers the monitor micro service; operator finds it and reads its status")

	errs := make(chan error, 1)
	without, err := nats.Connect(e.url, nats.UserInfo("without-monitor", "pw"),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case errs <- err:
			default:
			}
		}))
	if err != nil {
		return err
	}
	defer without.Close()
	if svc, err := monitor.New(monitor.Config{Instance: "refused"}).Service(without, monitor.ServiceConfig{}); err == nil {
		_ = without.Flush()
		select {
		case err = <-errs:
		case <-time.After(2 * time.Second):
		}
		_ = svc.Stop()
		if !errors.Is(err, nats.ErrPermissionViolation) {
			return fmt.Errorf("without the monitor's permissions: want a permissions violation, got %v", err)
		}
	}
	fmt.Fprintln(out, "ok: without the monitor's permissions: refused")
	return nil
}
