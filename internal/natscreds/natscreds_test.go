package natscreds_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/asterforge/aster/internal/natscreds"
	"github.com/asterforge/aster/internal/natstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	acc := natstest.NewOperator(t).Account(t, "APP", nil)
	good := filepath.Join(dir, "good.creds")
	acc.WriteCreds(t, good, nil)
	require.NoError(t, natscreds.Check(good))

	missing := filepath.Join(dir, "missing.creds")
	assert.ErrorIs(t, natscreds.Check(missing), os.ErrNotExist)

	garbage := filepath.Join(dir, "garbage.creds")
	require.NoError(t, os.WriteFile(garbage, []byte("not a creds file\n"), 0o600))
	err := natscreds.Check(garbage)
	require.Error(t, err)
	assert.Contains(t, err.Error(), garbage+": no nkey seed in it")

	contents, err := os.ReadFile(good)
	require.NoError(t, err)
	i := bytes.Index(contents, []byte("-----BEGIN USER NKEY SEED-----"))
	require.Positive(t, i)
	jwtOnly := filepath.Join(dir, "jwt-only.creds")
	require.NoError(t, os.WriteFile(jwtOnly, contents[:i], 0o600))
	err = natscreds.Check(jwtOnly)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no nkey seed in it")
}
