package supervision_test

import (
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/supervision"
)

func TestSmoke(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		r := start(t, supervision.Spec{Name: "app", Children: []supervision.ChildSpec{
			{Name: "a", Props: worker("a", j), Backoff: immediate},
			{Name: "b", Props: worker("b", j), Backoff: immediate},
		}}, supervision.Options{})
		assert.Equal(t, []string{"start a", "start b"}, j.take())
		r.send("a", boom{})
		assert.Equal(t, []string{"stop a", "start a"}, j.take())
		t.Log(r.tree.Snapshot())
		t.Log(r.takeEvents())
		require.NoError(t, r.stop())
		assert.Equal(t, []string{"stop b", "stop a"}, j.take())
	})
}
