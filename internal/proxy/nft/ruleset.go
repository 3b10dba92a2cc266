// Package nft holds what Skiff's nftables users (the service proxy and the
// NetworkPolicy enforcer) share: a Ruleset value for one table, the
// transaction that moves the kernel to it, and the runner of the nft tool.
package nft

import (
	"fmt"
	"sort"
	"strings"
)

// Chain is one nftables chain: Base is the hook declaration of a base chain
// ("type nat hook prerouting priority dstnat; policy accept;"), empty for a
// regular chain.
type Chain struct {
	Name  string
	Base  string
	Rules []string
}

// Set is a named set or map. Decl is its body ("type ipv4_addr;"). Managed
// containers are emptied and refilled with Elements on every sync; others
// (affinity sets) are created once and keep what the kernel puts in them.
type Set struct {
	Name     string
	Map      bool
	Decl     string
	Managed  bool
	Elements []string
}

// Ruleset is the whole desired content of the proxy's table.
type Ruleset struct {
	// Family and Table name the table ("ip", "skiff-proxy").
	Family, Table string
	Chains        map[string]*Chain
	Sets          map[string]*Set
}

// New is an empty Ruleset for one table.
func New(family, table string) *Ruleset {
	return &Ruleset{Family: family, Table: table, Chains: map[string]*Chain{}, Sets: map[string]*Set{}}
}

// Chain returns the chain, declaring it (with base, "" for a regular
// chain) if it is new.
func (r *Ruleset) Chain(name, base string) *Chain {
	c, ok := r.Chains[name]
	if !ok {
		c = &Chain{Name: name, Base: base}
		r.Chains[name] = c
	}
	return c
}

// Add appends a rule (a format and its arguments) to a chain.
func (r *Ruleset) Add(chain string, rule string, args ...any) {
	c := r.Chain(chain, "")
	c.Rules = append(c.Rules, fmt.Sprintf(rule, args...))
}

// Set returns the set or map, declaring it if it is new.
func (r *Ruleset) Set(name string, isMap bool, decl string, managed bool) *Set {
	s, ok := r.Sets[name]
	if !ok {
		s = &Set{Name: name, Map: isMap, Decl: decl, Managed: managed}
		r.Sets[name] = s
	}
	return s
}

// Elem adds an element to a declared set or map.
func (r *Ruleset) Elem(set, format string, args ...any) {
	s := r.Sets[set]
	s.Elements = append(s.Elements, fmt.Sprintf(format, args...))
}

// Existing names what the kernel's table holds (from `nft list table`):
// chain names, and set names with true for maps.
type Existing struct {
	Chains map[string]bool
	Sets   map[string]bool
}

// Transaction renders the nft script that takes the table from prev (the
// last Ruleset applied successfully, nil if unknown) and existing (what nft
// listed, nil if unknown) to r, in one atomic transaction. Chains whose
// rules did not change since prev are left alone (and objects prev had
// are not declared again); managed sets and maps get only the elements
// that changed; chains and sets no longer wanted are removed. If the
// kernel's table no longer matches prev the transaction fails as a whole
// and the caller syncs again with prev = nil.
func (r *Ruleset) Transaction(prev *Ruleset, existing *Existing) string {
	var b strings.Builder
	t := r.Family + " " + r.Table
	fmt.Fprintf(&b, "add table %s\n", t)
	for _, name := range sortedKeys(r.Sets) {
		s := r.Sets[name]
		if prev != nil {
			if old, ok := prev.Sets[name]; ok && old.Map == s.Map && old.Decl == s.Decl {
				continue
			}
		}
		kind := "set"
		if s.Map {
			kind = "map"
		}
		fmt.Fprintf(&b, "add %s %s %s { %s }\n", kind, t, name, s.Decl)
	}
	for _, name := range sortedKeys(r.Chains) {
		c := r.Chains[name]
		if prev != nil {
			if old, ok := prev.Chains[name]; ok && old.Base == c.Base {
				continue
			}
		}
		if c.Base != "" {
			fmt.Fprintf(&b, "add chain %s %s { %s }\n", t, name, c.Base)
		} else {
			fmt.Fprintf(&b, "add chain %s %s\n", t, name)
		}
	}
	// Managed sets and maps: when the previous content is known, only the
	// elements that changed are deleted and added (a map element whose
	// value changed is deleted first); otherwise flushed and refilled.
	incremental := func(s *Set) (*Set, bool) {
		if prev == nil {
			return nil, false
		}
		old, ok := prev.Sets[s.Name]
		return old, ok && old.Managed && old.Map == s.Map && old.Decl == s.Decl
	}
	for _, name := range sortedKeys(r.Sets) {
		s := r.Sets[name]
		if !s.Managed {
			continue
		}
		kind := "set"
		if s.Map {
			kind = "map"
		}
		old, ok := incremental(s)
		if !ok {
			fmt.Fprintf(&b, "flush %s %s %s\n", kind, t, name)
			continue
		}
		want := make(map[string]bool, len(s.Elements))
		for _, e := range s.Elements {
			want[e] = true
		}
		var gone []string
		for _, e := range old.Elements {
			if !want[e] {
				key, _, _ := strings.Cut(e, " : ")
				gone = append(gone, key)
			}
		}
		writeElements(&b, "delete", t, name, gone)
	}
	for _, name := range sortedKeys(r.Chains) {
		c := r.Chains[name]
		if prev != nil {
			if old, ok := prev.Chains[name]; ok && equalRules(old.Rules, c.Rules) {
				continue
			}
		}
		fmt.Fprintf(&b, "flush chain %s %s\n", t, name)
		for _, rule := range c.Rules {
			fmt.Fprintf(&b, "add rule %s %s %s\n", t, name, rule)
		}
	}
	for _, name := range sortedKeys(r.Sets) {
		s := r.Sets[name]
		if !s.Managed {
			continue
		}
		add := s.Elements
		if old, ok := incremental(s); ok {
			had := make(map[string]bool, len(old.Elements))
			for _, e := range old.Elements {
				had[e] = true
			}
			add = nil
			for _, e := range s.Elements {
				if !had[e] {
					add = append(add, e)
				}
			}
		}
		writeElements(&b, "add", t, name, add)
	}
	// Stale objects: everything known to exist that r does not want.
	staleChains, staleSets := map[string]bool{}, map[string]bool{}
	if prev != nil {
		for n := range prev.Chains {
			staleChains[n] = true
		}
		for n, s := range prev.Sets {
			staleSets[n] = s.Map
		}
	}
	if existing != nil {
		for n := range existing.Chains {
			staleChains[n] = true
		}
		for n, isMap := range existing.Sets {
			staleSets[n] = isMap
		}
	}
	for n := range r.Chains {
		delete(staleChains, n)
	}
	for n := range r.Sets {
		delete(staleSets, n)
	}
	for _, n := range sortedKeys(staleChains) {
		fmt.Fprintf(&b, "flush chain %s %s\n", t, n)
	}
	for _, n := range sortedKeys(staleChains) {
		fmt.Fprintf(&b, "delete chain %s %s\n", t, n)
	}
	for _, n := range sortedKeys(staleSets) {
		kind := "set"
		if staleSets[n] {
			kind = "map"
		}
		fmt.Fprintf(&b, "delete %s %s %s\n", kind, t, n)
	}
	return b.String()
}

func writeElements(b *strings.Builder, verb, t, set string, elems []string) {
	for i := 0; i < len(elems); i += 500 {
		end := min(i+500, len(elems))
		fmt.Fprintf(b, "%s element %s %s { %s }\n", verb, t, set, strings.Join(elems[i:end], ", "))
	}
}

func equalRules(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// CleanupScript removes one table (and nothing else).
func CleanupScript(family, table string) string {
	return fmt.Sprintf("add table %s %s\ndelete table %s %s\n", family, table, family, table)
}
