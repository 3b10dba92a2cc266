package apiserver

import (
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A list or watch limited to one name by a field selector is authorized as
// a request for that name (upstream's RequestInfo), so that a Role with
// resourceNames allows an informer on that one object.
func TestRequestAttributesNameFromFieldSelector(t *testing.T) {
	const cm = "/api/v1/namespaces/kube-system/configmaps"
	tests := []struct {
		name, method, target string
		wantVerb, wantName   string
	}{
		{"list by name", "GET", cm + "?fieldSelector=metadata.name%3Dextension-apiserver-authentication", "list", "extension-apiserver-authentication"},
		{"watch by name", "GET", cm + "?watch=true&fieldSelector=metadata.name%3Dextension-apiserver-authentication&resourceVersion=5", "watch", "extension-apiserver-authentication"},
		{"double equals", "GET", cm + "?fieldSelector=metadata.name%3D%3Dx", "list", "x"},
		{"with another term", "GET", cm + "?fieldSelector=metadata.namespace%3Dkube-system,metadata.name%3Dx", "list", "x"},
		{"not equal", "GET", cm + "?fieldSelector=metadata.name%21%3Dx", "list", ""},
		{"other field", "GET", cm + "?fieldSelector=type%3Dx", "list", ""},
		{"not a path segment", "GET", cm + "?fieldSelector=metadata.name%3D..", "list", ""},
		{"unparsable", "GET", cm + "?fieldSelector=metadata.name%3D%3D%3D", "list", ""},
		{"no selector", "GET", cm, "list", ""},
		{"get keeps the path's name", "GET", cm + "/a?fieldSelector=metadata.name%3Db", "get", "a"},
		{"deletecollection is not narrowed", "DELETE", cm + "?fieldSelector=metadata.name%3Dx", "deletecollection", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, tt.target, nil)
			attrs := requestAttributes(r, parseRequestInfo(r), nil)
			got := [2]string{attrs.Verb, attrs.Name}
			if diff := cmp.Diff([2]string{tt.wantVerb, tt.wantName}, got); diff != "" {
				t.Errorf("verb, name (-want +got):\n%s", diff)
			}
		})
	}
}
