package manager

import (
	"fmt"
	"slices"
	"strings"
)

// Selection is the parsed --controllers flag: upstream's syntax of a
// comma-separated list where "*" enables every controller that is on by
// default, "foo" enables foo and "-foo" disables foo. The default is "*".
type Selection []string

// ParseSelection validates items against the known controller names.
func ParseSelection(items []string, known []string) (Selection, error) {
	if len(items) == 0 {
		return Selection{"*"}, nil
	}
	var out Selection
	for _, raw := range items {
		item := strings.TrimSpace(raw)
		if item == "" {
			continue
		}
		name := strings.TrimPrefix(item, "-")
		if name != "*" && !slices.Contains(known, name) {
			return nil, fmt.Errorf("%q is not in the list of known controllers: %s", name, strings.Join(known, ", "))
		}
		if item == "-*" {
			return nil, fmt.Errorf(`"-*" is not allowed; list the controllers to run instead`)
		}
		out = append(out, item)
	}
	if len(out) == 0 {
		return Selection{"*"}, nil
	}
	return out, nil
}

// Enabled reports whether the controller name runs: an explicit "name" or
// "-name" wins over "*"; the first explicit mention decides, as upstream.
func (s Selection) Enabled(name string, disabledByDefault bool) bool {
	hasStar := false
	for _, item := range s {
		switch item {
		case name:
			return true
		case "-" + name:
			return false
		case "*":
			hasStar = true
		}
	}
	return hasStar && !disabledByDefault
}
