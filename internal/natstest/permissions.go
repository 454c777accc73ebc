package natstest

import (
	"fmt"
	"strings"
)

// This file holds the least-privilege permissions of a natsstore service
// account, for each way of reaching JetStream. examples/permissions prints
// them (and proves them with -check); the deployment tests of natsstore
// give them to their users. docs/nats.md quotes them.

// Topology says how a service reaches the JetStream that holds its bucket.
// The zero value is a service connected to a server of its own account's
// JetStream, without a domain.
type Topology struct {
	// Domain is the JetStream domain of the servers that hold the bucket
	// (natsstore.Config.Domain); "" for none.
	Domain string
	// Leaf says that the service connects to a leaf node and reaches
	// Domain through it. Connected to a server of the domain itself, the
	// server maps $JS.<domain>.API to $JS.API before it checks
	// permissions, so the plain subjects are the ones to allow.
	Leaf bool
	// APIPrefix is the prefix under which the service's account imports
	// the JetStream API of the account that holds the bucket
	// (natsstore.Config.APIPrefix, cross-account); it excludes Domain.
	APIPrefix string
	// InboxPrefix is the prefix of the service's reply and delivery
	// subjects (natsstore.DialOptions.InboxPrefix); "" means "_INBOX".
	InboxPrefix string
}

// Permission is one subject a service account may publish to.
type Permission struct {
	Subject string
	Why     string
	// Create: needed only when the store is to create the bucket.
	Create bool
	// Refused: without it, opening the store or a watch fails at once
	// with natsstore.ErrPermission. The others fail later: without
	// CONSUMER.DELETE, Close waits for its timeout; without $JS.FC, a watch
	// stalls for good after about 2 MiB of updates.
	Refused bool
}

// Inbox returns the topology's inbox prefix, "_INBOX" by default.
func (t Topology) Inbox() string {
	if t.InboxPrefix == "" {
		return "_INBOX"
	}
	return t.InboxPrefix
}

// Validate reports a topology that cannot be.
func (t Topology) Validate() error {
	switch {
	case t.Domain != "" && t.APIPrefix != "":
		return fmt.Errorf("a domain and an API prefix exclude each other")
	case t.Leaf && t.Domain == "":
		return fmt.Errorf("a leaf node reaches a hub's JetStream through its domain: set the domain")
	case strings.ContainsAny(t.APIPrefix+t.InboxPrefix, "*> "):
		return fmt.Errorf("prefixes must not contain wildcards or spaces")
	}
	return nil
}

// api returns the JetStream API prefix (no trailing dot) and the prefix of
// the bucket's key subjects as the service's server checks them.
func (t Topology) api(bucket string) (api, kv string) {
	switch {
	case t.APIPrefix != "":
		p := strings.TrimSuffix(t.APIPrefix, ".")
		return p, p + ".$KV." + bucket
	case t.Domain != "" && t.Leaf:
		p := "$JS." + t.Domain + ".API"
		return p, p + ".$KV." + bucket
	default:
		return "$JS.API", "$KV." + bucket
	}
}

// Permissions returns what a service account needs to use bucket: the
// subjects it publishes to, and those it subscribes to.
func Permissions(bucket string, t Topology) (publish []Permission, subscribe []string) {
	api, kv := t.api(bucket)
	stream := "KV_" + bucket
	return []Permission{
		{Subject: api + ".INFO", Why: "account info: the server's JetStream API level", Refused: true},
		{Subject: api + ".STREAM.INFO." + stream, Why: "bind to the bucket and check its configuration", Refused: true},
		{Subject: api + ".STREAM.MSG.GET." + stream, Why: "read a lease through the stream leader", Refused: true},
		{Subject: api + ".CONSUMER.CREATE." + stream + ".>", Why: "watch a lease (an ordered consumer)", Refused: true},
		{Subject: kv + ".>", Why: "acquire, renew and release (conditional publishes with a TTL)", Refused: true},
		{Subject: api + ".CONSUMER.DELETE." + stream + ".>", Why: "stop a watch: remove its consumer (without it, Close waits for its timeout)"},
		{Subject: "$JS.FC." + stream + ".>", Why: "flow control of a watch (without it, a watch stalls for good after about 2 MiB of updates)"},
		{Subject: api + ".DIRECT.GET." + stream + ".>", Why: "read a lease through any replica while reads wait for a meta leader " +
			"(without it, a standby then cannot take an expired lease)"},
		{Subject: api + ".STREAM.CREATE." + stream, Why: "create the bucket (with the configuration leases need)", Create: true},
	}, []string{t.Inbox() + ".>"}
}

// CrossAccount returns the exports of the account that holds bucket
// (exporter) and the imports of the service's account, as nats-server
// configuration, for a service that reaches the bucket through
// t.APIPrefix. The exports are as narrow as the permissions: the bucket's
// API, its keys, its flow control, and deliveries to t's inbox prefix
// (which must be the service's own: every message the exporting account
// publishes under it reaches the importer). create adds the bucket's
// creation.
func CrossAccount(bucket, exporter string, t Topology, create bool) (exports, imports []string) {
	stream := "KV_" + bucket
	p := strings.TrimSuffix(t.APIPrefix, ".")
	services := []string{"INFO", "STREAM.INFO." + stream, "STREAM.MSG.GET." + stream,
		"CONSUMER.CREATE." + stream + ".>", "CONSUMER.DELETE." + stream + ".>", "DIRECT.GET." + stream + ".>"}
	if create {
		services = append(services, "STREAM.CREATE."+stream)
	}
	for _, s := range services {
		exports = append(exports, fmt.Sprintf(`{service: "$JS.API.%s"}`, s))
		imports = append(imports, fmt.Sprintf(`{service: {account: %s, subject: "$JS.API.%s"}, to: "%s.%s"}`, exporter, s, p, s))
	}
	exports = append(exports,
		fmt.Sprintf(`{service: "$KV.%s.>"}`, bucket),
		fmt.Sprintf(`{service: "$JS.FC.%s.>"}`, stream),
		fmt.Sprintf(`{stream: "%s.>"}`, t.Inbox()))
	imports = append(imports,
		fmt.Sprintf(`{service: {account: %s, subject: "$KV.%s.>"}, to: "%s.$KV.%s.>"}`, exporter, bucket, p, bucket),
		fmt.Sprintf(`{service: {account: %s, subject: "$JS.FC.%s.>"}}`, exporter, stream),
		fmt.Sprintf(`{stream: {account: %s, subject: "%s.>"}}`, exporter, t.Inbox()))
	return exports, imports
}

// MonitorPermissions returns what a process that registers the monitor
// package's NATS micro service (named service, "aster" by default) needs on
// top of its store's permissions, and what an operator who runs `aster
// status` and `aster tree` needs: the subjects each publishes to and
// subscribes to. inbox is the operator's inbox prefix ("_INBOX").
func MonitorPermissions(service, inbox string) (svcPublish, svcSubscribe, opPublish, opSubscribe []string) {
	return []string{inbox + ".>"}, // replies to the requests it answers
		[]string{"$SRV.>", service + ".>"}, // discovery (PING, INFO, STATS) and the endpoints
		[]string{"$SRV.INFO." + service, service + ".>"},
		[]string{inbox + ".>"}
}
