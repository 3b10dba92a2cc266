// Package discovery serves the API server's discovery documents, the way
// kubectl, client-go and controller-runtime expect to find them:
//
//	/api                    metav1.APIVersions (legacy) or the core group (aggregated)
//	/api/v1                 metav1.APIResourceList
//	/apis                   metav1.APIGroupList (legacy) or every other group (aggregated)
//	/apis/<group>           metav1.APIGroup
//	/apis/<group>/<version> metav1.APIResourceList
//	/version                version.Info
//
// Responses are negotiated from the Accept header: JSON, YAML or protobuf
// (application/vnd.kubernetes.protobuf, the "k8s\x00" envelope) for the legacy
// documents, and aggregated discovery (apidiscovery.k8s.io/v2
// APIGroupDiscoveryList, in JSON or protobuf) at /api and /apis when the
// Accept header asks for it with "g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList".
// The response Content-Type names what was chosen, so client-go can tell
// the two formats apart.
//
// The documents are built once from the registry.Resource list (and again
// on SetResources), so serving them costs an encode.
package discovery
