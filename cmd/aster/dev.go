package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/asterforge/aster/natsstore/embedded"
)

func devFlags(fs *flag.FlagSet, c *cli) {
	fs.StringVar(&c.store, "store", "", "JetStream store `directory` (default: aster/dev in the user's cache directory)")
	fs.StringVar(&c.host, "host", "127.0.0.1", "`address` to listen on")
	fs.IntVar(&c.port, "port", 4222, "client `port` (0: any free port)")
}

// runDev runs an embedded NATS server with JetStream until ctx is done.
func runDev(ctx context.Context, c *cli, _ []string) error {
	dir := c.store
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return fmt.Errorf("no store directory: %w (set --store)", err)
		}
		dir = filepath.Join(cache, "aster", "dev")
	}
	srv, err := embedded.Start(ctx, embedded.Config{StoreDir: dir, Host: c.host, Port: c.port, ServerName: "aster-dev"})
	if err != nil {
		return fmt.Errorf("start NATS: %w (is port %d taken? Choose another with --port)", err, c.port)
	}
	defer func() { _ = srv.Close() }()
	if c.json {
		if err := printJSON(c, map[string]string{"url": srv.ClientURL(), "store_dir": srv.StoreDir()}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(c.stdout, "NATS with JetStream on %s, store %s\n", srv.ClientURL(), srv.StoreDir())
		fmt.Fprintf(c.stdout, "connect with NATS_URL=%s (natsstore.DialOptions{URLs: []string{%q}}); stop with Ctrl-C\n",
			srv.ClientURL(), srv.ClientURL())
	}
	if c.devReady != nil {
		c.devReady(srv.ClientURL())
	}
	<-ctx.Done()
	return nil
}
