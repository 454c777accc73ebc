package natsstore_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/natsstore"
)

// The deployment matrix of docs/nats.md: each secured topology runs the
// conformance suite (short), a handover through the watch, and a watch
// that keeps up with several MiB of updates, with a service user that has
// exactly the permissions examples/permissions prints for it.

// Operator mode (JWT accounts, .creds files), least-privilege user.
func TestDeployOperatorLeastPrivilege(t *testing.T) {
	t.Parallel()
	op := natstest.NewOperator(t)
	app := op.Account(t, "APP", nil)
	srv := natstest.Start(t, op.Trusted())
	admin := filepath.Join(t.TempDir(), "admin.creds")
	app.WriteCreds(t, admin, nil)
	svc := filepath.Join(t.TempDir(), "svc.creds")
	app.WriteCreds(t, svc, natstest.Allow(leastPrivilege("leases", natstest.Topology{})))

	cfg := natsstore.Config{Bucket: "leases"}
	dial(t, srv.ClientURL(), cfg, natsstore.DialOptions{CredentialsFile: admin}) // creates the bucket
	cfg.NoCreate = true
	deployment(t, func(t *testing.T) *natsstore.Store {
		return dial(t, srv.ClientURL(), cfg, natsstore.DialOptions{CredentialsFile: svc})
	}, rawJetStream(t, srv.ClientURL(), cfg, nats.UserCredentials(svc)))
}

// TLS with client certificates (mTLS).
func TestDeployMutualTLS(t *testing.T) {
	t.Parallel()
	p := natstest.NewPKI(t)
	srv := natstest.Start(t, p.MutualTLS())
	d := natsstore.DialOptions{CAFile: p.CAFile, CertFile: p.ClientCertFile, KeyFile: p.ClientKeyFile}
	cfg := natsstore.Config{Bucket: "leases"}
	deployment(t, func(t *testing.T) *natsstore.Store { return dial(t, srv.ClientURL(), cfg, d) },
		rawJetStream(t, srv.ClientURL(), cfg, nats.RootCAs(p.CAFile), nats.ClientCert(p.ClientCertFile, p.ClientKeyFile)))
}

// A service connected to a leaf node, with the bucket in the hub's
// JetStream domain.
func TestDeployDomainThroughLeaf(t *testing.T) {
	t.Parallel()
	hub := natstest.Start(t, natstest.WithDomain("hub"), natstest.WithLeafNodes(t))
	pub, sub := leastPrivilege("leases", natstest.Topology{Domain: "hub", Leaf: true})
	leaf := natstest.StartLeaf(t, hub, natstest.WithUser("admin", "a"), natstest.WithRestrictedUser("svc", "s", pub, sub))

	cfg := natsstore.Config{Bucket: "leases", Domain: "hub"}
	dial(t, leaf.ClientURL(), cfg, natsstore.DialOptions{User: "admin", Password: "a"}) // creates the bucket in the hub
	cfg.NoCreate = true
	deployment(t, func(t *testing.T) *natsstore.Store {
		return dial(t, leaf.ClientURL(), cfg, natsstore.DialOptions{User: "svc", Password: "s"})
	}, rawJetStream(t, leaf.ClientURL(), cfg, nats.UserInfo("svc", "s")))
}

// A service connected to a server of the bucket's domain: the server maps
// $JS.<domain>.API before it checks permissions, so the plain ones apply.
func TestDeployDomainDirect(t *testing.T) {
	t.Parallel()
	top := natstest.Topology{Domain: "hub"}
	pub, sub := leastPrivilege("leases", top)
	srv := natstest.Start(t, natstest.WithDomain("hub"),
		natstest.WithUser("admin", "a"), natstest.WithRestrictedUser("svc", "s", pub, sub))
	cfg := natsstore.Config{Bucket: "leases", Domain: "hub"}
	dial(t, srv.ClientURL(), cfg, natsstore.DialOptions{User: "admin", Password: "a"})
	cfg.NoCreate = true
	d := natsstore.DialOptions{User: "svc", Password: "s"}
	handover(t, dial(t, srv.ClientURL(), cfg, d), dial(t, srv.ClientURL(), cfg, d))
	flood(t, dial(t, srv.ClientURL(), cfg, d), rawJetStream(t, srv.ClientURL(), cfg, nats.UserInfo("svc", "s")))
}

// crossAccount returns the configuration of two accounts: A holds the
// bucket (its user admin may do anything), and B's user svc reaches it
// through top's API prefix with the least privilege.
func crossAccount(top natstest.Topology) string {
	exports, imports := natstest.CrossAccount("leases", "A", top, false)
	pub, sub := leastPrivilege("leases", top)
	return fmt.Sprintf(`accounts {
  A: { jetstream: enabled, users: [{user: admin, password: a}], exports: [%s] }
  B: {
    users: [{user: svc, password: s, permissions: {publish: {allow: [%s]}, subscribe: {allow: [%s]}}}]
    imports: [%s]
  }
}`, strings.Join(exports, ", "), quoted(pub), quoted(sub), strings.Join(imports, ", "))
}

func quoted(subjects []string) string {
	q := make([]string, len(subjects))
	for i, s := range subjects {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// A service in account B using the bucket of account A through an API
// prefix (a cross-account import), with an inbox prefix of its own on which
// A's watch deliveries are imported.
func TestDeployAPIPrefix(t *testing.T) {
	t.Parallel()
	top := natstest.Topology{APIPrefix: "JS.A.API", InboxPrefix: "_INBOX_B"}
	srv := natstest.Start(t, natstest.WithConfig(t, crossAccount(top)))
	dial(t, srv.ClientURL(), natsstore.Config{Bucket: "leases"}, natsstore.DialOptions{User: "admin", Password: "a"})

	cfg := natsstore.Config{Bucket: "leases", APIPrefix: top.APIPrefix, NoCreate: true}
	d := natsstore.DialOptions{User: "svc", Password: "s", InboxPrefix: top.InboxPrefix}
	deployment(t, func(t *testing.T) *natsstore.Store { return dial(t, srv.ClientURL(), cfg, d) },
		rawJetStream(t, srv.ClientURL(), cfg, nats.UserInfo("svc", "s"), nats.CustomInboxPrefix(top.InboxPrefix)))
}
