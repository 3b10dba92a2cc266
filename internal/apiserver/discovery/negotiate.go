package discovery

import (
	"mime"
	"sort"
	"strconv"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	"k8s.io/apimachinery/pkg/runtime"
)

// Media types discovery serves.
const (
	mediaJSON     = runtime.ContentTypeJSON     // application/json
	mediaYAML     = runtime.ContentTypeYAML     // application/yaml
	mediaProtobuf = runtime.ContentTypeProtobuf // application/vnd.kubernetes.protobuf

	aggregatedKind = "APIGroupDiscoveryList"
)

// aggregatedParams are the media type parameters naming aggregated discovery.
var aggregatedParams = ";g=" + apidiscoveryv2.GroupName + ";v=v2;as=" + aggregatedKind

// choice is the outcome of content negotiation.
type choice struct {
	// mediaType is the serializer's media type: JSON, YAML or protobuf.
	mediaType string
	// aggregated asks for the APIGroupDiscoveryList document.
	aggregated bool
}

// contentType is the Content-Type header of a response in this choice.
func (c choice) contentType() string {
	if c.aggregated {
		return c.mediaType + aggregatedParams
	}
	return c.mediaType
}

type acceptClause struct {
	mediaType string
	params    map[string]string
	q         float64
}

// parseAccept splits an Accept header into clauses, highest q first (stable
// for equal q). Malformed clauses and q=0 are dropped.
func parseAccept(header string) []acceptClause {
	var out []acceptClause
	for _, part := range strings.Split(header, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		mt, params, err := mime.ParseMediaType(part)
		if err != nil {
			continue
		}
		q := 1.0
		if qs, ok := params["q"]; ok {
			f, err := strconv.ParseFloat(qs, 64)
			if err != nil || f < 0 || f > 1 {
				continue
			}
			q = f
			delete(params, "q")
		}
		if q == 0 {
			continue
		}
		out = append(out, acceptClause{mediaType: mt, params: params, q: q})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].q > out[j].q })
	return out
}

// negotiate picks the response format for an Accept header. allowAggregated
// is true at /api and /apis. ok is false when nothing acceptable is served.
func negotiate(header string, allowAggregated bool) (choice, bool) {
	if strings.TrimSpace(header) == "" {
		return choice{mediaType: mediaJSON}, true
	}
	for _, c := range parseAccept(header) {
		_, hasG := c.params["g"]
		_, hasV := c.params["v"]
		_, hasAs := c.params["as"]
		if hasG || hasV || hasAs {
			if !allowAggregated || !isAggregated(c.params) {
				continue
			}
			switch c.mediaType {
			case mediaJSON, mediaProtobuf:
				return choice{mediaType: c.mediaType, aggregated: true}, true
			}
			continue
		}
		switch c.mediaType {
		case mediaJSON, "application/*", "*/*":
			return choice{mediaType: mediaJSON}, true
		case mediaYAML:
			return choice{mediaType: mediaYAML}, true
		case mediaProtobuf:
			return choice{mediaType: mediaProtobuf}, true
		}
	}
	return choice{}, false
}

// isAggregated reports whether media type parameters ask for
// apidiscovery.k8s.io/v2 APIGroupDiscoveryList. The "profile" parameter
// "nopeer" (no peer-aggregated resources) is accepted: this server has no
// peers, so both profiles get the same document.
func isAggregated(params map[string]string) bool {
	if params["g"] != apidiscoveryv2.GroupName || params["v"] != "v2" || params["as"] != aggregatedKind {
		return false
	}
	for k, v := range params {
		switch k {
		case "g", "v", "as":
		case "profile":
			if v != "nopeer" {
				return false
			}
		default:
			return false
		}
	}
	return true
}
