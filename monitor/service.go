package monitor

import (
	"encoding/json"
	"fmt"
	"regexp"
	"runtime/debug"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// DefaultServiceName is the name of the micro service Service registers.
const DefaultServiceName = "aster"

// ServiceConfig configures the NATS micro service. The zero value works.
type ServiceConfig struct {
	// Name is the service's name, as `nats micro ls` lists it and as the
	// endpoints' subjects begin. "" means DefaultServiceName. Letters,
	// digits, '-' and '_' only.
	Name string
	// Version is the service's version (semantic versioning). "" means
	// the version of the aster module this program was built with, or
	// 0.0.0 when it is not known.
	Version string
	// Description is shown by `nats micro info`. "" means a description
	// naming the instance.
	Description string
}

// The service's endpoints. Each instance answers on
// <name>.<instance-id>.<endpoint>, with JSON.
const (
	// EndpointStatus answers with the Report.
	EndpointStatus = "status"
	// EndpointLeases answers with the Report without its trees.
	EndpointLeases = "leases"
	// EndpointTree answers with the Report's trees: those run on their own
	// and the supervisors' workload trees.
	EndpointTree = "tree"
)

// MetadataInstance is the service metadata key that names the instance.
const MetadataInstance = "instance"

// flushWait bounds how long Service waits for the server to confirm the
// service's subscriptions.
const flushWait = 5 * time.Second

// semver is the grammar the micro package accepts for versions.
var semver = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$`)

// Service registers the registry as a NATS micro service on nc: `nats micro
// ls` lists it (one line per process), `nats micro info` shows each
// instance's endpoints, and `nats req <name>.<id>.status ”` returns an
// instance's Report. Every process registers its own instance; the
// endpoints' subjects carry the instance's ID, so that one request reaches
// one process (the micro package's PING, INFO and STATS reach all).
//
// When Service returns on a connected nc, the server has the service's
// subscriptions: a discovery sent afterwards finds this instance.
//
// Stop the returned service when done; it also stops when nc closes. The
// user of nc needs to subscribe to $SRV.> and <name>.>, and to publish to
// the requesters' reply subjects (_INBOX.>).
func (r *Registry) Service(nc *nats.Conn, cfg ServiceConfig) (micro.Service, error) {
	if nc == nil {
		return nil, fmt.Errorf("monitor: service: nil connection")
	}
	name := cfg.Name
	if name == "" {
		name = DefaultServiceName
	}
	version := cfg.Version
	if version == "" {
		version = moduleVersion()
	}
	desc := cfg.Description
	if desc == "" {
		desc = "Aster leases, locks and supervision trees of " + r.instance
	}
	svc, err := micro.AddService(nc, micro.Config{
		Name: name, Version: version, Description: desc,
		Metadata: map[string]string{MetadataInstance: r.instance},
	})
	if err != nil {
		return nil, fmt.Errorf("monitor: service %q: %w", name, err)
	}
	group := svc.AddGroup(name+"."+svc.Info().ID, micro.WithGroupQueueGroupDisabled())
	for _, ep := range []struct {
		name, what string
		report     func(Report) any
	}{
		{EndpointStatus, "the instance's leases, locks, trees and health", func(rep Report) any { return rep }},
		{EndpointLeases, "the instance's leases and locks, with its health", func(rep Report) any {
			rep.Trees = nil
			for i := range rep.Leases {
				rep.Leases[i].Tree = nil
			}
			return rep
		}},
		{EndpointTree, "the instance's supervision trees", func(rep Report) any { return trees(rep) }},
	} {
		err := group.AddEndpoint(ep.name, r.handler(ep.report), micro.WithEndpointMetadata(map[string]string{
			"description": ep.what, "format": "application/json",
		}))
		if err != nil {
			_ = svc.Stop()
			return nil, fmt.Errorf("monitor: service %q: endpoint %s: %w", name, ep.name, err)
		}
	}
	// The subscriptions reach the server with the connection's next flush;
	// wait for it, so that a discovery sent once Service has returned finds
	// this instance. Best effort: while disconnected, the client subscribes
	// again when it reconnects.
	_ = nc.FlushTimeout(flushWait)
	return svc, nil
}

// TreesReport is what the tree endpoint answers: every tree of an
// instance, those run on their own and the supervisors' workload trees
// (with the lease they run under).
type TreesReport struct {
	Instance string            `json:"instance"`
	Trees    []NamedTreeReport `json:"trees"`
}

// NamedTreeReport is a tree and, for a workload tree, its lease and
// whether this instance leads it.
type NamedTreeReport struct {
	TreeReport
	LeaseID string `json:"lease_id,omitempty"`
	State   string `json:"lease_state,omitempty"`
}

func trees(rep Report) TreesReport {
	out := TreesReport{Instance: rep.Instance, Trees: []NamedTreeReport{}}
	for _, l := range rep.Leases {
		if l.Tree != nil {
			out.Trees = append(out.Trees, NamedTreeReport{TreeReport: *l.Tree, LeaseID: l.LeaseID, State: l.State.String()})
		}
	}
	for _, t := range rep.Trees {
		out.Trees = append(out.Trees, NamedTreeReport{TreeReport: t})
	}
	return out
}

func (r *Registry) handler(view func(Report) any) micro.Handler {
	return micro.HandlerFunc(func(req micro.Request) {
		b, err := json.Marshal(view(r.Report()))
		if err != nil {
			_ = req.Error("500", "monitor: "+err.Error(), nil)
			return
		}
		_ = req.Respond(b)
	})
}

// moduleVersion returns the version of the aster module in this program's
// build, or 0.0.0.
func moduleVersion() string {
	const module = "github.com/asterforge/aster"
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "0.0.0"
	}
	v := info.Main.Version
	if info.Main.Path != module {
		v = ""
		for _, d := range info.Deps {
			if d.Path == module {
				v = d.Version
			}
		}
	}
	v = strings.TrimPrefix(v, "v")
	if !semver.MatchString(v) {
		return "0.0.0"
	}
	return v
}
