// Package natscreds checks NATS credentials files before a connection uses
// them, so that a bad file is reported as such rather than as a refused or
// failed connection.
package natscreds

import (
	"fmt"
	"os"

	"github.com/nats-io/nkeys"
)

// Check reads a .creds file as nats.go will: a user JWT and an nkey seed.
func Check(path string) error {
	contents, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if _, err := nkeys.ParseDecoratedJWT(contents); err != nil {
		return fmt.Errorf("%s: no user JWT in it: %w", path, err)
	}
	kp, err := nkeys.ParseDecoratedNKey(contents)
	if err != nil {
		return fmt.Errorf("%s: no nkey seed in it: %w", path, err)
	}
	kp.Wipe()
	return nil
}
