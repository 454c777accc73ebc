//go:build unix

package demo

import (
	"io"
	"log/slog"
	"strings"

	"github.com/lmittmann/tint"

	"github.com/asterforge/aster/lease"
)

// NewLogger returns the demo's coloured logger (plain when noColor).
func NewLogger(w io.Writer, noColor bool) *slog.Logger {
	return slog.New(tint.NewTextHandler(w, &tint.Options{
		TimeFormat:  "15:04:05.000",
		NoColor:     noColor,
		ReplaceAttr: ShortOwners,
	}))
}

// ShortOwners shortens owner IDs ("runtime-" and 32 hex digits) to their
// first 8 hex digits: enough to tell the instances apart in a log.
func ShortOwners(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindString {
		if s := a.Value.String(); strings.HasPrefix(s, lease.OwnerIDPrefix) && len(s) == len(lease.OwnerIDPrefix)+32 {
			a.Value = slog.StringValue(ShortOwner(s))
		}
	}
	return a
}

// ShortOwner shortens one owner ID.
func ShortOwner(id string) string {
	if len(id) > len(lease.OwnerIDPrefix)+8 {
		return id[:len(lease.OwnerIDPrefix)+8] + "…"
	}
	return id
}
