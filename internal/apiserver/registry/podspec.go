// The subresources that write part of a pod's spec.

package registry

// HandleEphemeralContainers: pods/ephemeralcontainers, a get, update or
// patch of a Pod of which only spec.ephemeralContainers is taken (kubectl
// debug adds a container to a running pod this way).
const HandleEphemeralContainers SubresourceHandler = "ephemeralcontainers"

// EphemeralContainersSubresource is pods/ephemeralcontainers.
func EphemeralContainersSubresource() Subresource {
	return Subresource{Handler: HandleEphemeralContainers, Verbs: getPatchUpdate}
}

// HandleResize: pods/resize, a get, update or patch of a Pod of which only
// the containers' resources and resizePolicy are taken (in-place vertical
// scaling, `kubectl patch --subresource resize`).
const HandleResize SubresourceHandler = "resize"

// ResizeSubresource is pods/resize.
func ResizeSubresource() Subresource {
	return Subresource{Handler: HandleResize, Verbs: getPatchUpdate}
}
