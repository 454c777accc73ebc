package demo

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCheckReplicas(t *testing.T) {
	cluster := []string{"nats://127.0.0.1:4222"}
	for _, c := range []struct {
		replicas int
		urls     []string
		want     string // "" for none
	}{
		{1, nil, ""},
		{1, cluster, ""},
		{3, cluster, ""},
		{5, cluster, ""},
		{0, cluster, "-replicas must be between 1 and 5, got 0"},
		{6, cluster, "-replicas must be between 1 and 5, got 6"},
		{-1, nil, "-replicas must be between 1 and 5, got -1"},
		{3, nil, "-replicas needs -nats-url pointing at a JetStream cluster (the embedded server is one node)"},
	} {
		err := CheckReplicas(c.replicas, c.urls)
		if c.want == "" {
			assert.NoError(t, err, "%d %v", c.replicas, c.urls)
		} else {
			assert.EqualError(t, err, c.want, "%d %v", c.replicas, c.urls)
		}
	}
}
