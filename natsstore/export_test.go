package natsstore

import (
	"context"
	"errors"
)

// DirectFree asks any replica for key as a standby does while reads wait
// for a meta leader (direct.go), for the deployment tests: it returns the
// revision at which the answer shows key free, or 0.
func DirectFree(ctx context.Context, s *Store, key string) (uint64, error) {
	deadline, _ := ctx.Deadline()
	err := s.directFree(ctx, deadline, key, errors.New("a read refused in a test"))
	if f, ok := errors.AsType[*freeAt](err); ok {
		return f.rev, nil
	}
	return 0, err
}
