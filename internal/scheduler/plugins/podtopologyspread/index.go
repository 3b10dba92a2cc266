package podtopologyspread

import (
	"strings"
	"sync"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// maxIndexEntries bounds the selectors whose counts are kept between
// cycles; the least recently used is dropped first.
const maxIndexEntries = 16

// countIndex keeps, from one cycle to the next, how many pods matching a
// constraint's selector each node holds, and their sums per topology
// domain. A cycle recounts only the nodes whose NodeInfo changed (a new
// generation from the cache) since the last time the selector was
// counted, so PreFilter costs O(nodes) cheap comparisons plus the pods of
// the changed nodes, instead of every pod of every node. It is used only
// for nodes the cache manages (generation > 0), and for constraints whose
// eligible nodes do not depend on the pod (no node affinity or taint
// policy to honour); other cases count directly.
type countIndex struct {
	mu      sync.Mutex
	tick    int64
	entries map[string]*indexEntry
}

type indexEntry struct {
	// nodes is aligned with the snapshot's node list.
	nodes []nodeCount
	// totals are the matching pods per domain value, and members the
	// eligible nodes per domain value (a domain exists while it has one).
	totals  map[string]int
	members map[string]int
	used    int64
}

type nodeCount struct {
	ni       *framework.NodeInfo
	gen      int64
	eligible bool
	value    string
	count    int
}

func newCountIndex() *countIndex { return &countIndex{entries: map[string]*indexEntry{}} }

// domainCounts returns the matching pods per domain of c's topology key
// over nodes that have every key of keys, or false when the index cannot
// serve (nodes not managed by the cache). The returned map must not be
// changed.
func (x *countIndex) domainCounts(nodes []*framework.NodeInfo, c *constraint, keys []string, ns string) (map[string]int, bool) {
	for _, ni := range nodes {
		if ni.Generation == 0 {
			return nil, false
		}
	}
	key := ns + "\x00" + c.topologyKey + "\x00" + strings.Join(keys, ",") + "\x00" + c.selector.String()
	x.mu.Lock()
	defer x.mu.Unlock()
	x.tick++
	e := x.entries[key]
	if e == nil || len(e.nodes) != len(nodes) {
		x.evict(key)
		e = &indexEntry{nodes: make([]nodeCount, len(nodes)), totals: map[string]int{}, members: map[string]int{}}
		x.entries[key] = e
	}
	e.used = x.tick
	for i, ni := range nodes {
		nc := &e.nodes[i]
		if nc.ni == ni && nc.gen == ni.Generation {
			continue
		}
		if nc.eligible {
			e.totals[nc.value] -= nc.count
			if e.members[nc.value]--; e.members[nc.value] == 0 {
				delete(e.members, nc.value)
				delete(e.totals, nc.value)
			}
		}
		*nc = nodeCount{ni: ni, gen: ni.Generation}
		node := ni.Node()
		if !hasKeys(node.Labels, keys) {
			continue
		}
		nc.eligible, nc.value = true, node.Labels[c.topologyKey]
		nc.count = countMatching(ni.Pods, c.selector, ns)
		e.totals[nc.value] += nc.count
		e.members[nc.value]++
	}
	return e.totals, true
}

// evict makes room for key, dropping the least recently used entry.
func (x *countIndex) evict(key string) {
	delete(x.entries, key)
	if len(x.entries) < maxIndexEntries {
		return
	}
	oldest, at := "", int64(-1)
	for k, e := range x.entries {
		if at < 0 || e.used < at {
			oldest, at = k, e.used
		}
	}
	delete(x.entries, oldest)
}

func hasKeys(l map[string]string, keys []string) bool {
	for _, k := range keys {
		if _, ok := l[k]; !ok {
			return false
		}
	}
	return true
}
