package peer

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/asterforge/aster/lock"
	"github.com/asterforge/aster/natsstore"
)

// system is one side of the comparison: a lock service on a server.
type system struct {
	name    string // as in the sub-benchmark names
	server  string // natsDefault, natsSync or etcdServer
	session bool   // Aster: lock.Config.Session; etcd: always
	// perLock: etcd with a session of its own for every lock (held
	// measurements only).
	perLock bool
}

// The systems, in the order every measurement runs them.
var (
	asterSession     = system{name: "aster", server: natsDefault, session: true}
	asterSyncSession = system{name: "aster-sync", server: natsSync, session: true}
	asterLease       = system{name: "aster-lease", server: natsDefault}
	etcdShared       = system{name: "etcd", server: etcdServer, session: true}
	etcdNoSyncShared = system{name: "etcd-nosync", server: etcdNoSync, session: true}
	etcdPerLock      = system{name: "etcd-session-per-lock", server: etcdServer, session: true, perLock: true}
)

// errHeld is what tryLock returns when another client holds the lock.
var errHeld = errors.New("held")

// client is one process's lock client, with a connection of its own.
type client interface {
	// lock blocks until it holds key, and returns how to release it.
	lock(ctx context.Context, key string) (unlock func(context.Context) error, err error)
	// tryLock makes one attempt; it returns errHeld when key is held.
	tryLock(ctx context.Context, key string) (unlock func(context.Context) error, err error)
	// crash drops the connection without releasing anything, as a killed
	// process would.
	crash()
	// life is a short-lived lock client's whole life on this client's
	// connection: a new Locker (Aster) or session (etcd), one TryLock of
	// key and its Unlock, and the Locker's Close (the session's).
	life(ctx context.Context, key string) error
	// close ends the client, releasing what it still holds.
	close()
}

// newClient connects a client of sys to its server, with locks of ttl.
func newClient(b *testing.B, sys system, ttl time.Duration) client {
	b.Helper()
	return newClientOn(b, serverFor(b, sys.server), sys, ttl)
}

// newClientOn is newClient on a given server.
func newClientOn(b *testing.B, srv *server, sys system, ttl time.Duration) client {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if sys.server == etcdServer || sys.server == etcdNoSync {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.url}, DialTimeout: 10 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		c := &etcdClient{cli: cli, ttl: int(ttl / time.Second), perLock: sys.perLock}
		if !sys.perLock {
			if c.sess, err = concurrency.NewSession(cli, concurrency.WithTTL(c.ttl)); err != nil {
				b.Fatal(err)
			}
		}
		return c
	}
	store, err := natsstore.Dial(ctx, natsstore.DialOptions{URLs: []string{srv.url}}, natsstore.Config{Bucket: "peer"})
	if err != nil {
		b.Fatal(err)
	}
	cfg := lock.Config{TTL: ttl, Session: sys.session, RetryInterval: time.Second}
	l, err := lock.New(store, cfg)
	if err != nil {
		b.Fatal(err)
	}
	return &asterClient{store: store, locker: l, cfg: cfg}
}

type asterClient struct {
	store  *natsstore.Store
	locker *lock.Locker
	cfg    lock.Config
}

func (c *asterClient) life(ctx context.Context, key string) error {
	l, err := lock.New(c.store, c.cfg)
	if err != nil {
		return err
	}
	g, err := l.TryAcquire(ctx, key)
	if err == nil {
		err = g.Release(ctx)
	}
	return errors.Join(err, l.Close(ctx))
}

func (c *asterClient) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	g, err := c.locker.Acquire(ctx, key)
	if err != nil {
		return nil, err
	}
	return g.Release, nil
}

func (c *asterClient) tryLock(ctx context.Context, key string) (func(context.Context) error, error) {
	g, err := c.locker.TryAcquire(ctx, key)
	if errors.Is(err, lock.ErrHeld) {
		return nil, errHeld
	}
	if err != nil {
		return nil, err
	}
	return g.Release, nil
}

func (c *asterClient) crash() { _ = c.store.Close() } // Dial's connection: closed with it

func (c *asterClient) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = c.locker.Close(ctx)
	_ = c.store.Close()
}

type etcdClient struct {
	cli     *clientv3.Client
	sess    *concurrency.Session // shared by every lock; nil with perLock
	ttl     int                  // seconds
	perLock bool
}

func (c *etcdClient) session() (*concurrency.Session, func(), error) {
	if !c.perLock {
		return c.sess, func() {}, nil
	}
	s, err := concurrency.NewSession(c.cli, concurrency.WithTTL(c.ttl))
	if err != nil {
		return nil, nil, err
	}
	return s, func() { _ = s.Close() }, nil
}

func (c *etcdClient) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	s, done, err := c.session()
	if err != nil {
		return nil, err
	}
	m := concurrency.NewMutex(s, "/lock/"+key)
	if err := m.Lock(ctx); err != nil {
		done()
		return nil, err
	}
	return func(ctx context.Context) error { defer done(); return m.Unlock(ctx) }, nil
}

func (c *etcdClient) tryLock(ctx context.Context, key string) (func(context.Context) error, error) {
	s, done, err := c.session()
	if err != nil {
		return nil, err
	}
	m := concurrency.NewMutex(s, "/lock/"+key)
	if err := m.TryLock(ctx); err != nil {
		done()
		if errors.Is(err, concurrency.ErrLocked) {
			return nil, errHeld
		}
		return nil, err
	}
	return func(ctx context.Context) error { defer done(); return m.Unlock(ctx) }, nil
}

func (c *etcdClient) life(ctx context.Context, key string) error {
	s, err := concurrency.NewSession(c.cli, concurrency.WithTTL(c.ttl), concurrency.WithContext(ctx))
	if err != nil {
		return err
	}
	m := concurrency.NewMutex(s, "/lock/"+key)
	if err = m.TryLock(ctx); err == nil {
		err = m.Unlock(ctx)
	}
	return errors.Join(err, s.Close())
}

func (c *etcdClient) crash() { _ = c.cli.Close() } // the session's lease is not revoked: it expires

func (c *etcdClient) close() {
	if c.sess != nil {
		_ = c.sess.Close()
	}
	_ = c.cli.Close()
}

func (s system) String() string { return fmt.Sprintf("system=%s", s.name) }
