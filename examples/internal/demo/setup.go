package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/asterforge/aster/natsstore/embedded"
)

// SplitURLs splits a comma-separated -nats-url value, dropping blanks.
func SplitURLs(s string) []string {
	var urls []string
	for _, u := range strings.Split(s, ",") {
		if u = strings.TrimSpace(u); u != "" {
			urls = append(urls, u)
		}
	}
	return urls
}

// ReplicasUsage is the help text of every example's -replicas flag.
const ReplicasUsage = "`replicas` of the buckets when they are created: 1 to 5, above 1 only with -nats-url (3 or 5 in a JetStream cluster)"

// CheckReplicas checks a -replicas value against the -nats-url values urls:
// between 1 and 5, and above 1 only with an existing deployment (the
// embedded server is a single node, which cannot hold more than one replica).
func CheckReplicas(replicas int, urls []string) error {
	switch {
	case replicas < 1 || replicas > 5:
		return fmt.Errorf("-replicas must be between 1 and 5, got %d", replicas)
	case replicas > 1 && len(urls) == 0:
		return errors.New("-replicas needs -nats-url pointing at a JetStream cluster (the embedded server is one node)")
	}
	return nil
}

// Executable returns exe, or this program when exe is empty: the binary an
// orchestrator runs its child processes from.
func Executable(exe string) (string, error) {
	if exe != "" {
		return exe, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding this program to run its children: %w", err)
	}
	return exe, nil
}

// Servers returns urls, or, when urls is empty, the URL of an embedded NATS
// server it starts under the given name. The returned stop shuts that server
// down and removes its store; it does nothing for an existing deployment.
func Servers(ctx context.Context, urls []string, name string, log *slog.Logger) ([]string, func(), error) {
	if len(urls) > 0 {
		log.Info("using an existing NATS deployment", "urls", urls)
		return urls, func() {}, nil
	}
	ns, err := embedded.Start(ctx, embedded.Config{ServerName: name})
	if err != nil {
		return nil, nil, fmt.Errorf("starting the embedded NATS server: %w", err)
	}
	log.Info("embedded NATS server started", "url", ns.ClientURL())
	return []string{ns.ClientURL()}, func() { _ = ns.Close() }, nil
}
