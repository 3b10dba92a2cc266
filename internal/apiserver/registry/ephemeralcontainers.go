package registry

// HandleEphemeralContainers: pods/ephemeralcontainers, a get, update or
// patch of a Pod of which only spec.ephemeralContainers is taken (kubectl
// debug adds a container to a running pod this way).
const HandleEphemeralContainers SubresourceHandler = "ephemeralcontainers"

// EphemeralContainersSubresource is pods/ephemeralcontainers.
func EphemeralContainersSubresource() Subresource {
	return Subresource{Handler: HandleEphemeralContainers, Verbs: getPatchUpdate}
}
