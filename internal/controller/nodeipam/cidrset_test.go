package nodeipam

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNewCIDRSet(t *testing.T) {
	cases := []struct {
		cluster string
		mask    int
		wantErr string
	}{
		{"10.42.0.0/16", 24, ""},
		{"10.42.0.0/16", 16, ""},
		{"10.42.0.0/16", 15, "between"},
		{"10.42.0.0/16", 33, "between"},
		{"10.0.0.0/8", 25, "more than 16 bits"},
		{"fd00:42::/48", 64, ""},
	}
	for _, tc := range cases {
		t.Run(tc.cluster, func(t *testing.T) {
			_, err := newCIDRSet(netip.MustParsePrefix(tc.cluster), tc.mask)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("newCIDRSet(%s, %d) = %v, want error containing %q", tc.cluster, tc.mask, err, tc.wantErr)
			}
		})
	}
}

// TestCIDRSetScript runs steps on a set of four /24 blocks of 10.42.0.0/22.
func TestCIDRSetScript(t *testing.T) {
	type step struct{ op, cidr string }
	cases := []struct {
		name  string
		steps []step
		want  []string
	}{
		{
			name:  "blocks in order, then full",
			steps: []step{{"next", ""}, {"next", ""}, {"next", ""}, {"next", ""}, {"next", ""}},
			want:  []string{"10.42.0.0/24", "10.42.1.0/24", "10.42.2.0/24", "10.42.3.0/24", "full"},
		},
		{
			name:  "occupied blocks are skipped",
			steps: []step{{"occupy", "10.42.0.0/24"}, {"occupy", "10.42.2.0/24"}, {"next", ""}, {"next", ""}, {"next", ""}},
			want:  []string{"ok", "ok", "10.42.1.0/24", "10.42.3.0/24", "full"},
		},
		{
			name:  "a released block comes back only after going round",
			steps: []step{{"next", ""}, {"next", ""}, {"release", "10.42.0.0/24"}, {"next", ""}, {"next", ""}, {"next", ""}, {"next", ""}},
			want:  []string{"10.42.0.0/24", "10.42.1.0/24", "ok", "10.42.2.0/24", "10.42.3.0/24", "10.42.0.0/24", "full"},
		},
		{
			name:  "a shorter prefix covers several blocks",
			steps: []step{{"occupy", "10.42.0.0/23"}, {"next", ""}, {"release", "10.42.0.0/23"}, {"next", ""}},
			want:  []string{"ok", "10.42.2.0/24", "ok", "10.42.3.0/24"},
		},
		{
			name:  "a longer prefix takes its whole block",
			steps: []step{{"occupy", "10.42.0.128/25"}, {"next", ""}},
			want:  []string{"ok", "10.42.1.0/24"},
		},
		{
			name:  "outside the cluster CIDR",
			steps: []step{{"occupy", "10.43.0.0/24"}, {"occupy", "10.40.0.0/14"}, {"release", "192.168.0.0/24"}, {"occupy", "fd00::/64"}},
			want:  []string{"10.43.0.0/24 is outside", "10.40.0.0/14 is outside", "192.168.0.0/24 is outside", "fd00::/64 is outside"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := newCIDRSet(netip.MustParsePrefix("10.42.0.0/22"), 24)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			result := func(err error) string {
				if err != nil {
					return strings.TrimSuffix(err.Error(), " the cluster CIDR 10.42.0.0/22")
				}
				return "ok"
			}
			for _, st := range tc.steps {
				switch st.op {
				case "next":
					p, err := s.allocateNext()
					if errors.Is(err, ErrFull) {
						got = append(got, "full")
					} else {
						got = append(got, p.String())
					}
				case "occupy":
					got = append(got, result(s.occupy(netip.MustParsePrefix(st.cidr))))
				case "release":
					got = append(got, result(s.release(netip.MustParsePrefix(st.cidr))))
				}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("results (-want +got):\n%s", d)
			}
		})
	}
}

func TestCIDRSetIPv6(t *testing.T) {
	s, err := newCIDRSet(netip.MustParsePrefix("fd00:42::/56"), 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.occupy(netip.MustParsePrefix("fd00:42::/64")); err != nil {
		t.Fatal(err)
	}
	p, err := s.allocateNext()
	if err != nil || p.String() != "fd00:42:0:1::/64" {
		t.Errorf("allocateNext = %v, %v; want fd00:42:0:1::/64", p, err)
	}
}

func TestParseRange(t *testing.T) {
	cases := []struct {
		cidr    string
		mask    int
		want    string
		wantErr string
	}{
		{"10.42.0.0/16", 24, "10.42.0.0/16", ""},
		{" 10.42.7.0/16", 24, "10.42.0.0/16", ""},
		{"10.42.0.0", 24, "", "cluster CIDR"},
		{"10.42.0.0/16", 12, "", "mask size 12"},
	}
	for _, tc := range cases {
		got, err := ParseRange(tc.cidr, tc.mask)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseRange(%q, %d) = %v, want error with %q", tc.cidr, tc.mask, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got.String() != tc.want {
			t.Errorf("ParseRange(%q, %d) = %v, %v; want %s", tc.cidr, tc.mask, got, err, tc.want)
		}
	}
}
