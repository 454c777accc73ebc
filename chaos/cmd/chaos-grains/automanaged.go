package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/labstack/echo"
)

// automanagedMember makes a member of protoactor-go's own cluster: its
// automanaged provider, which polls GET /_health on every host of
// -am-hosts each refresh and takes the members that answered as the
// topology, and its disthash lookup. Nothing of package grains and no NATS.
//
// The provider's own server binds 0.0.0.0:<port>; this one listens on
// 127.0.0.1:-am-port and answers /_health with the node the provider's own
// handler would (automanaged.NewWithTesting takes the server; Start uses
// its Listener).
//
// Its refresh is -ttl (2 s in the suite), as automanaged.New's default: a
// killed member refuses the next poll, so it leaves every view within one
// refresh, as one of ours leaves within a TTL of its last renewal; a
// paused one is dropped when a poll's request times out (the provider's
// HTTP client waits 2 s), within refresh + 2 s.
func automanagedMember(sys *actor.ActorSystem, o options, remoting *remote.Config,
	kinds cluster.ConfigOption) (member, error) {
	if o.amPort == 0 || o.amHosts == "" {
		return member{}, errors.New("-lookup automanaged needs -am-port and -am-hosts")
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(o.amPort)))
	if err != nil {
		return member{}, fmt.Errorf("automanaged: %w", err)
	}
	e := echo.New()
	e.HideBanner, e.HidePort, e.Listener = true, true, ln
	var c *cluster.Cluster // set before the provider starts its server
	e.GET("/_health", func(ec echo.Context) error {
		host, port, err := c.ActorSystem.GetHostPort()
		if err != nil {
			return err
		}
		return ec.JSON(http.StatusOK, automanaged.NewNode(c.Config.Name, c.ActorSystem.ID, host, port, o.amPort,
			c.GetClusterKinds()))
	})
	p := automanaged.NewWithTesting(o.ttl, o.amPort, e, strings.Split(o.amHosts, ",")...)
	c = cluster.New(sys, cluster.Configure(o.prefix, p, disthash.New(), remoting, kinds))
	return member{
		c:  c,
		id: func() string { return c.ActorSystem.ID },
		// Read without the member list's lock, as protoactor-go's own
		// callers do (this binary is built without the race detector).
		members: func() int { return c.MemberList.Members().Len() },
		stop: func(context.Context) {
			_ = p.Shutdown(false) // closes the server, ends the polls
			c.Gossip.Shutdown()
			c.Remote.Shutdown(false)
			c.ActorSystem.Shutdown()
		},
	}, nil
}
