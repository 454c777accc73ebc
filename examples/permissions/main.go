// Command permissions prints the NATS permissions a service account needs to
// use a natsstore bucket, and with -check proves them: it starts a
// nats-server in the process with a user that has exactly those
// permissions, and has that user open the bucket, acquire, renew and release
// a lease and watch it; then, for each required permission, a user without
// it, who must be refused with natsstore.ErrPermission.
//
//	go run ./examples/permissions -bucket aster_leases
//	go run ./examples/permissions -bucket aster_leases -domain hub
//	go run ./examples/permissions -check
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// perm is one subject a service account may publish to.
type perm struct {
	Subject  string
	Why      string
	Required bool // needed (as opposed to recommended)
	Create   bool // needed only when the store is to create the bucket
	// Refused: without it, Dial or Watch fails at once with
	// natsstore.ErrPermission (Check proves it).
	Refused bool
}

// Permissions lists what a service account needs for bucket, with the
// JetStream domain (or "") of the account.
func Permissions(bucket, domain string) (publish []perm, subscribe []string) {
	api := "$JS.API"
	if domain != "" {
		api = "$JS." + domain + ".API"
	}
	stream := "KV_" + bucket
	return []perm{
		{api + ".INFO", "account info: the server's JetStream API level", true, false, true},
		{api + ".STREAM.INFO." + stream, "bind to the bucket and check its configuration", true, false, true},
		{api + ".STREAM.MSG.GET." + stream, "read a lease through the stream leader", true, false, true},
		{api + ".CONSUMER.CREATE." + stream + ".>", "watch a lease (an ordered consumer)", true, false, true},
		{"$KV." + bucket + ".>", "acquire, renew and release (conditional publishes with a TTL)", true, false, true},
		{api + ".CONSUMER.DELETE." + stream + ".>", "stop a watch: remove its consumer (without it, Close may wait for its timeout)", true, false, false},
		{"$JS.FC." + stream + ".>", "flow-control replies of a watch's consumer", false, false, false},
		{api + ".STREAM.CREATE." + stream, "create the bucket (with the recommended configuration)", false, true, false},
	}, []string{"_INBOX.>"}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("permissions", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bucket := fs.String("bucket", natsstore.DefaultBucket, "the KV `bucket`")
	domain := fs.String("domain", "", "the JetStream `domain`, if any")
	create := fs.Bool("create", false, "include the permission to create the bucket")
	check := fs.Bool("check", false, "prove the permissions against an in-process nats-server")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	pub, sub := Permissions(*bucket, *domain)
	fmt.Fprint(stdout, config(pub, sub, *create))
	if !*check {
		return 0
	}
	if *domain != "" {
		fmt.Fprintln(stderr, "permissions: -check runs without a domain")
		return 2
	}
	fmt.Fprintln(stdout)
	if err := Check(context.Background(), *bucket, stdout); err != nil {
		fmt.Fprintln(stderr, "permissions:", err)
		return 1
	}
	return 0
}

// config renders the permissions as a nats-server authorization block.
func config(pub []perm, sub []string, create bool) string {
	var b strings.Builder
	b.WriteString("permissions: {\n  publish: { allow: [\n")
	for _, p := range pub {
		if p.Create && !create {
			continue
		}
		kind := "required"
		switch {
		case p.Create:
			kind = "only if the store is to"
		case !p.Required:
			kind = "recommended"
		}
		fmt.Fprintf(&b, "    %q, # %s: %s\n", p.Subject, kind, p.Why)
	}
	b.WriteString("  ] }\n  subscribe: { allow: [\n")
	for _, s := range sub {
		fmt.Fprintf(&b, "    %q, # replies, and a watch's deliveries\n", s)
	}
	b.WriteString("  ] }\n}\n")
	return b.String()
}

// Check starts a nats-server in the process and proves the permissions of
// bucket: a user with all of them (the bucket's creation included) uses a
// lease fully; a user with the required ones only, on the existing bucket,
// too (its Close included); and a user without any one of the permissions
// marked Refused is refused with natsstore.ErrPermission.
func Check(ctx context.Context, bucket string, out io.Writer) error {
	dir, err := os.MkdirTemp("", "aster-permissions-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	pub, sub := Permissions(bucket, "")
	allow := func(keep func(perm) bool) *server.Permissions {
		var subjects []string
		for _, p := range pub {
			if keep(p) {
				subjects = append(subjects, p.Subject)
			}
		}
		return &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: subjects},
			Subscribe: &server.SubjectPermission{Allow: sub},
		}
	}
	users := []*server.User{
		{Username: "service", Password: "pw", Permissions: allow(func(perm) bool { return true })},
		{Username: "minimal", Password: "pw", Permissions: allow(func(p perm) bool { return p.Required })},
	}
	var refused []perm
	for _, p := range pub {
		if p.Refused {
			refused = append(refused, p)
			users = append(users, &server.User{Username: "without-" + p.Subject, Password: "pw",
				Permissions: allow(func(q perm) bool { return q.Required && q != p })})
		}
	}
	srv, err := server.NewServer(&server.Options{
		ServerName: "aster-permissions", Host: "127.0.0.1", Port: server.RANDOM_PORT,
		JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true, Users: users,
	})
	if err != nil {
		return err
	}
	srv.Start()
	defer func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	}()
	if !srv.ReadyForConnections(10 * time.Second) {
		return errors.New("nats-server not ready")
	}

	for _, user := range []string{"service", "minimal"} {
		if err := useLease(ctx, srv.ClientURL(), user, bucket); err != nil {
			return fmt.Errorf("user %s: %w", user, err)
		}
		fmt.Fprintf(out, "ok: %-8s opens bucket %s, acquires, renews, releases and watches a lease\n", user, bucket)
	}
	for _, p := range refused {
		err := useLease(ctx, srv.ClientURL(), "without-"+p.Subject, bucket)
		if !errors.Is(err, natsstore.ErrPermission) {
			return fmt.Errorf("without %s: want natsstore.ErrPermission, got %v", p.Subject, err)
		}
		fmt.Fprintf(out, "ok: without %s: refused with natsstore.ErrPermission\n", p.Subject)
	}
	return nil
}

// closeTimeout bounds Store.Close in the check.
const closeTimeout = time.Second

// useLease has user open bucket (the first user creates it), watch a lease,
// acquire, renew and release it, and see the release through the watch.
func useLease(ctx context.Context, url, user, bucket string) (err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	store, err := natsstore.Dial(ctx, natsstore.DialOptions{URLs: []string{url}, User: user, Password: "pw"},
		natsstore.Config{Bucket: bucket, CloseTimeout: closeTimeout})
	if err != nil {
		return err
	}
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
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return errors.New("the watch ended")
			}
			if ev.Kind == lease.EventFree && ev.Revision > l.Revision {
				return nil
			}
		case <-ctx.Done():
			return fmt.Errorf("the watch did not report the release: %w", ctx.Err())
		}
	}
}
