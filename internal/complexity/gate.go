package complexity

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// Limits of the gate: a function on the lease path may have a complexity
// of at most LeasePathLimit, any other function of the library at most
// LibraryLimit.
const (
	LeasePathLimit = 15
	LibraryLimit   = 20
)

// leasePath lists the package directories of the lease path; their
// sub-packages are on it too.
var leasePath = []string{"natsstore", "lease", "actors", "lock", "internal/leasehold"}

// Limit returns the highest complexity allowed in the package at dir.
func Limit(dir string) int {
	for _, p := range leasePath {
		if dir == p || strings.HasPrefix(dir, p+"/") {
			return LeasePathLimit
		}
	}
	return LibraryLimit
}

// Allowlist maps a function's Key to the highest complexity it may have
// although over its Limit.
type Allowlist map[string]int

// ParseAllowlist reads an allowlist: one function a line, "figure dir
// name" (as gocyclo prints it, with the package's directory for its name);
// blank lines and lines starting with # are skipped.
func ParseAllowlist(r io.Reader) (Allowlist, error) {
	out := Allowlist{}
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		if len(fields) != 3 {
			return nil, fmt.Errorf("line %d: want \"figure dir name\", got %q", line, text)
		}
		n, err := strconv.Atoi(fields[0])
		if err != nil || n < 1 {
			return nil, fmt.Errorf("line %d: bad figure %q", line, fields[0])
		}
		key := fields[1] + " " + fields[2]
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("line %d: %s listed twice", line, key)
		}
		out[key] = n
	}
	return out, sc.Err()
}

// Verdict is what the gate finds.
type Verdict struct {
	// Failures are functions over their limit that are not listed, or that
	// grew past their listed figure.
	Failures []string
	// Lower are listed functions that shrank, went under their limit or
	// are gone: the allowlist can be tightened (Tightened).
	Lower []string
}

// Check compares funcs with allow. A function whose Key appears more than
// once (one per build tag, say) counts with its highest figure.
func Check(funcs []Func, allow Allowlist) Verdict {
	var v Verdict
	seen := highest(funcs)
	for _, f := range sortedFuncs(seen) {
		limit := Limit(f.Dir)
		listed, ok := allow[f.Key()]
		switch {
		case f.Complexity <= limit:
		case !ok:
			v.Failures = append(v.Failures, fmt.Sprintf("%s: %s has complexity %d, over the limit of %d for %s: "+
				"split it into steps (or, for a function that was already there, list it in allowlist.txt)",
				f.Pos, f.Name, f.Complexity, limit, f.Dir))
		case f.Complexity > listed:
			v.Failures = append(v.Failures, fmt.Sprintf("%s: %s has complexity %d, more than the %d allowlist.txt allows it",
				f.Pos, f.Name, f.Complexity, listed))
		}
	}
	for _, key := range sortedKeys(allow) {
		f, ok := seen[key]
		switch {
		case !ok:
			v.Lower = append(v.Lower, key+": gone")
		case f.Complexity <= Limit(f.Dir):
			v.Lower = append(v.Lower, fmt.Sprintf("%s: %d, within its limit now", key, f.Complexity))
		case f.Complexity < allow[key]:
			v.Lower = append(v.Lower, fmt.Sprintf("%s: %d, listed at %d", key, f.Complexity, allow[key]))
		}
	}
	return v
}

// Tightened returns allow with each listed function's figure lowered to
// what it is now, and those within their limit or gone removed. It never
// adds a function or raises a figure.
func Tightened(funcs []Func, allow Allowlist) Allowlist {
	seen := highest(funcs)
	out := Allowlist{}
	for key, listed := range allow {
		f, ok := seen[key]
		if !ok || f.Complexity <= Limit(f.Dir) {
			continue
		}
		out[key] = min(listed, f.Complexity)
	}
	return out
}

// Format writes allow after header (lines of comment), highest figures first.
func Format(w io.Writer, header string, allow Allowlist) error {
	keys := sortedKeys(allow)
	sort.SliceStable(keys, func(i, j int) bool { return allow[keys[i]] > allow[keys[j]] })
	if _, err := io.WriteString(w, header); err != nil {
		return err
	}
	for _, k := range keys {
		if _, err := fmt.Fprintf(w, "%d %s\n", allow[k], k); err != nil {
			return err
		}
	}
	return nil
}

func highest(funcs []Func) map[string]Func {
	seen := make(map[string]Func, len(funcs))
	for _, f := range funcs {
		if old, ok := seen[f.Key()]; !ok || f.Complexity > old.Complexity {
			seen[f.Key()] = f
		}
	}
	return seen
}

func sortedFuncs(m map[string]Func) []Func {
	out := make([]Func, 0, len(m))
	for _, k := range sortedKeysOf(m) {
		out = append(out, m[k])
	}
	return out
}

func sortedKeys(m Allowlist) []string { return sortedKeysOf(m) }

func sortedKeysOf[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
