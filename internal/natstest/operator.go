package natstest

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// Operator is the operator of a decentralised (JWT) deployment: servers
// trust it, it signs accounts, and accounts sign users, whose credentials
// files (.creds) clients connect with. Its accounts are served to the
// servers from memory.
//
//	op := natstest.NewOperator(t)
//	acc := op.Account(t, "APP", nil)
//	srv := natstest.Start(t, op.Trusted())
//	creds, _ := acc.WriteCreds(t, filepath.Join(t.TempDir(), "svc.creds"), nil)
type Operator struct {
	kp       nkeys.KeyPair
	claims   *jwt.OperatorClaims
	resolver *server.MemAccResolver
	sys      *Account
}

// Account is an account of an Operator.
type Account struct {
	Name      string
	PublicKey string
	op        *Operator
	kp        nkeys.KeyPair

	mu     sync.Mutex
	claims *jwt.AccountClaims
}

// NewOperator creates an operator with a system account.
func NewOperator(t testing.TB) *Operator {
	t.Helper()
	kp, err := nkeys.CreateOperator()
	must(t, err)
	pub, err := kp.PublicKey()
	must(t, err)
	op := &Operator{kp: kp, claims: jwt.NewOperatorClaims(pub), resolver: &server.MemAccResolver{}}
	op.claims.Name = "natstest"
	op.sys = op.newAccount(t, "SYS", nil, false)
	op.claims.SystemAccount = op.sys.PublicKey
	return op
}

// Trusted returns the option that makes a server trust the operator and
// resolve its accounts.
func (op *Operator) Trusted() Option {
	return WithOptions(func(o *server.Options) {
		o.TrustedOperators = []*jwt.OperatorClaims{op.claims}
		o.AccountResolver = op.resolver
		o.SystemAccount = op.sys.PublicKey
		o.Users, o.Nkeys, o.Authorization = nil, nil, ""
	})
}

// Account creates an account with JetStream enabled (no limits), after
// edit (if not nil) changed its claims.
func (op *Operator) Account(t testing.TB, name string, edit func(*jwt.AccountClaims)) *Account {
	t.Helper()
	return op.newAccount(t, name, edit, true)
}

func (op *Operator) newAccount(t testing.TB, name string, edit func(*jwt.AccountClaims), jetStream bool) *Account {
	t.Helper()
	kp, err := nkeys.CreateAccount()
	must(t, err)
	pub, err := kp.PublicKey()
	must(t, err)
	a := &Account{Name: name, PublicKey: pub, op: op, kp: kp, claims: jwt.NewAccountClaims(pub)}
	a.claims.Name = name
	if jetStream {
		a.claims.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	}
	if edit != nil {
		edit(a.claims)
	}
	a.store(t)
	return a
}

// store signs the account's claims and hands them to the resolver. a.mu
// must not be held.
func (a *Account) store(t testing.TB) string {
	t.Helper()
	a.mu.Lock()
	token, err := a.claims.Encode(a.op.kp)
	a.mu.Unlock()
	must(t, err)
	must(t, a.op.resolver.Store(a.PublicKey, token))
	return token
}

// Update changes the account's claims with edit, signs them, and pushes
// them to the running servers: a revocation, for instance, disconnects the
// users it revokes.
func (a *Account) Update(t testing.TB, edit func(*jwt.AccountClaims), servers ...*Server) {
	t.Helper()
	a.mu.Lock()
	edit(a.claims)
	a.mu.Unlock()
	token := a.store(t)
	claims, err := jwt.DecodeAccountClaims(token)
	must(t, err)
	for _, s := range servers {
		srv := s.NATS()
		if srv == nil {
			continue
		}
		acc, err := srv.LookupAccount(a.PublicKey)
		must(t, err)
		srv.UpdateAccountClaims(acc, claims)
	}
}

// WriteCreds creates a user of the account, with the claims edit (if not
// nil) sets (permissions, expiry), writes its credentials file to path
// (replacing it atomically, as a rotation should), and returns the user's
// public key.
func (a *Account) WriteCreds(t testing.TB, path string, edit func(*jwt.UserClaims)) string {
	t.Helper()
	kp, err := nkeys.CreateUser()
	must(t, err)
	pub, err := kp.PublicKey()
	must(t, err)
	seed, err := kp.Seed()
	must(t, err)
	uc := jwt.NewUserClaims(pub)
	uc.Name = filepath.Base(path)
	uc.IssuerAccount = a.PublicKey
	if edit != nil {
		edit(uc)
	}
	token, err := uc.Encode(a.kp)
	must(t, err)
	creds, err := jwt.FormatUserConfig(token, seed)
	must(t, err)
	tmp := path + ".new"
	must(t, os.WriteFile(tmp, creds, 0o600))
	must(t, os.Rename(tmp, path))
	return pub
}

// Allow returns user claims edits that allow publishing to publish and
// subscribing to subscribe, and nothing else.
func Allow(publish, subscribe []string) func(*jwt.UserClaims) {
	return func(uc *jwt.UserClaims) {
		uc.Permissions.Pub.Allow = append(jwt.StringList(nil), publish...)
		uc.Permissions.Sub.Allow = append(jwt.StringList(nil), subscribe...)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
}
