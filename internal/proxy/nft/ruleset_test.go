package nft

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseExisting(t *testing.T) {
	listing := `table ip skiff-proxy {
	set cluster-ips {
		type ipv4_addr
	}
	map service-ips {
		type ipv4_addr . inet_proto . inet_service : verdict
	}
	chain services {
		ip daddr . meta l4proto . th dport vmap @service-ips
	}
	chain service-ABC-default/web/tcp/http {
	}
}
`
	want := &Existing{
		Chains: map[string]bool{"services": true, "service-ABC-default/web/tcp/http": true},
		Sets:   map[string]bool{"cluster-ips": false, "service-ips": true},
	}
	if diff := cmp.Diff(want, ParseExisting(listing)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestTransactionElements: with a known previous ruleset only changed
// elements move (a map element whose value changed is deleted, then added
// again), and nothing already declared is declared again.
func TestTransactionElements(t *testing.T) {
	build := func(elems ...string) *Ruleset {
		r := New("ip", "t")
		r.Set("m", true, "type ipv4_addr : verdict;", true)
		r.Add("c", "ip daddr vmap @m")
		for _, e := range elems {
			r.Elem("m", "%s", e)
		}
		return r
	}
	prev := build("10.0.0.1 : goto a", "10.0.0.2 : goto b")
	next := build("10.0.0.1 : goto a", "10.0.0.2 : goto c", "10.0.0.3 : goto d")
	got := next.Transaction(prev, nil)
	want := strings.Join([]string{
		"add table ip t",
		"delete element ip t m { 10.0.0.2 }",
		"add element ip t m { 10.0.0.2 : goto c, 10.0.0.3 : goto d }",
		"",
	}, "\n")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
