// Package allocator hands out Service ClusterIPs from a CIDR and NodePorts
// from a port range.
//
// State lives in memory only. Upstream persists its allocation bitmaps in
// etcd; Skiff instead rebuilds them when the API server starts, from every
// stored Service (Services.Rebuild), which is correct while one API server
// writes Services. All types are safe for concurrent use.
//
// The error values and messages match upstream's, since they reach clients
// inside 422 responses: "provided IP is already allocated", "the provided
// IP (...) is not in the valid range...", "provided port is already
// allocated", "provided port is not in the valid range...".
package allocator
