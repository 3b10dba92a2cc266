// Package apps holds the rules of apps/v1 deployments and replicasets:
// defaults (including the pod template's, from registry/core/pod),
// validation, generation and status rules, the scale subresource
// (ScaleOf, ApplyScale), field selectors and kubectl's table columns.
package apps
