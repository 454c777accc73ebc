package monitor

import (
	"fmt"
	"slices"
	"strings"

	"github.com/asterforge/aster/lease"
)

// Describe is one line about a change of a lease's holder, as `aster watch`
// prints it: when this process saw it, and who holds the lease now (with
// the holder it took over from). prev is the observation before o; first
// says that o is the first one (the state when the watch began).
func Describe(o, prev lease.Observation, first bool) string {
	at := o.Seen.Format("15:04:05.000")
	switch {
	case !o.Held:
		if first {
			return fmt.Sprintf("%s  %s  free", at, o.LeaseID)
		}
		if prev.Held && prev.Holder.OwnerID == "" {
			return fmt.Sprintf("%s  %s  free (was a value that is not a lease)", at, o.LeaseID)
		}
		return fmt.Sprintf("%s  %s  free (was %s, token %d)", at, o.LeaseID, dash(prev.Holder.OwnerID), prev.Holder.Token)
	case o.Holder.OwnerID == "":
		return fmt.Sprintf("%s  %s  held by a value that is not a lease (revision %d): nobody can take it until it is "+
			"deleted, and then for the bucket's MaxTTL", at, o.LeaseID, o.Revision)
	}
	line := fmt.Sprintf("%s  %s  held by %s  token %d  term %s  ttl %v  meta %s", at, o.LeaseID, o.Holder.OwnerID,
		o.Holder.Token, o.Holder.Term, o.Holder.TTL, FormatMeta(o.Holder.Meta))
	if !first && prev.Held && prev.Holder.OwnerID != "" {
		line += fmt.Sprintf("  (handover from %s, token %d)", prev.Holder.OwnerID, prev.Holder.Token)
	}
	return line
}

// FormatMeta prints a lease holder's metadata as k=v pairs, sorted and
// comma-separated ("-" when there is none), escaping only what would make
// the list ambiguous.
func FormatMeta(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	esc := strings.NewReplacer("%", "%25", ",", "%2C", "=", "%3D", " ", "%20")
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + esc.Replace(m[k])
	}
	return strings.Join(parts, ",")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
