package supervision

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// validate reports every problem of spec, each wrapping ErrInvalidSpec.
func validate(spec *Spec) error {
	name := spec.Name
	if name == "" {
		name = "tree"
	}
	var errs []error
	errs = validateName(name, name, errs)
	errs = validateSpec(spec, name, map[*Spec]bool{}, errs)
	return errors.Join(errs...)
}

func validateSpec(spec *Spec, path string, seen map[*Spec]bool, errs []error) []error {
	if seen[spec] {
		return append(errs, invalid(path, "spec contains itself"))
	}
	seen[spec] = true
	defer delete(seen, spec)
	if spec.Strategy > RestForOne {
		errs = append(errs, invalid(path, "unknown strategy %d", spec.Strategy))
	}
	if spec.Period < 0 {
		errs = append(errs, invalid(path, "negative period %v", spec.Period))
	}
	names := map[string]bool{}
	for i := range spec.Children {
		c := &spec.Children[i]
		if c.Name != "" && names[c.Name] {
			errs = append(errs, invalid(path+"/"+c.Name, "duplicate name"))
		}
		names[c.Name] = true
		errs = validateChild(c, path, seen, errs)
	}
	return errs
}

func validateChild(c *ChildSpec, parent string, seen map[*Spec]bool, errs []error) []error {
	path := parent + "/" + c.Name
	switch {
	case c.Name == "":
		path = fmt.Sprintf("%s/[unnamed]", parent)
		errs = append(errs, invalid(path, "empty name"))
	default:
		errs = validateName(c.Name, path, errs)
	}
	producers := 0
	for _, set := range []bool{c.Props != nil, c.Func != nil, c.Service != nil, c.Tree != nil} {
		if set {
			producers++
		}
	}
	switch producers {
	case 0:
		errs = append(errs, invalid(path, "missing producer: set one of Props, Func, Service and Tree"))
	case 1:
	default:
		errs = append(errs, invalid(path, "more than one of Props, Func, Service and Tree set"))
	}
	if c.Restart > Temporary {
		errs = append(errs, invalid(path, "unknown restart type %d", c.Restart))
	}
	if c.Shutdown < 0 {
		errs = append(errs, invalid(path, "negative shutdown timeout %v", c.Shutdown))
	}
	if c.StartTimeout < 0 {
		errs = append(errs, invalid(path, "negative start timeout %v", c.StartTimeout))
	}
	if !c.Backoff.Immediate {
		if err := c.Backoff.policy().Validate(); err != nil {
			errs = append(errs, invalid(path, "backoff: %s", strings.TrimPrefix(err.Error(), "backoff: invalid policy: ")))
		}
	}
	if c.Tree != nil {
		errs = validateSpec(c.Tree, path, seen, errs)
	}
	return errs
}

// validateName rejects '/', which separates the names in ids and paths,
// and '#', which marks an id suffix (see supervisor.spawnIncarnation).
func validateName(name, path string, errs []error) []error {
	for _, r := range "/#" {
		if strings.ContainsRune(name, r) {
			errs = append(errs, invalid(path, "name must not contain '%c'", r))
		}
	}
	return errs
}

func invalid(path, format string, args ...any) error {
	return &SpecError{Path: path, Reason: fmt.Sprintf(format, args...)}
}

// normalise returns a deep copy of a valid spec with defaults filled in.
func normalise(spec Spec) Spec {
	if spec.Name == "" {
		spec.Name = "tree"
	}
	return normaliseSpec(spec)
}

func normaliseSpec(spec Spec) Spec {
	if spec.Intensity == 0 {
		spec.Intensity = DefaultIntensity
	} else if spec.Intensity < 0 {
		spec.Intensity = NoRestarts
	}
	if spec.Period == 0 {
		spec.Period = DefaultPeriod
	}
	children := make([]ChildSpec, len(spec.Children))
	for i, c := range spec.Children {
		children[i] = normaliseChild(c)
	}
	spec.Children = children
	return spec
}

func normaliseChild(c ChildSpec) ChildSpec {
	if c.Tree != nil {
		sub := normaliseSpec(*c.Tree)
		c.Tree = &sub
		if c.Shutdown == 0 {
			c.Shutdown = DefaultShutdown
			for _, k := range sub.Children {
				c.Shutdown = satAdd(c.Shutdown, k.Shutdown)
			}
		}
		if c.StartTimeout == 0 {
			c.StartTimeout = DefaultStartTimeout
			for _, k := range sub.Children {
				c.StartTimeout = satAdd(c.StartTimeout, k.StartTimeout)
			}
		}
		return c
	}
	if c.Shutdown == 0 {
		c.Shutdown = DefaultShutdown
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = DefaultStartTimeout
	}
	return c
}

func satAdd(a, b time.Duration) time.Duration {
	if s := a + b; s >= a {
		return s
	}
	return time.Duration(1<<63 - 1)
}
