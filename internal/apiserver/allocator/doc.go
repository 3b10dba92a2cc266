// Package allocator hands out Service ClusterIPs from the ServiceCIDRs
// and NodePorts from a port range.
//
// The bitmaps are in memory, rebuilt when the API server starts from
// every stored Service (Services.Rebuild). For ClusterIPs they are the
// local index only: each allocation is claimed as an IPAddress object
// (IPClaimer), which arbitrates between API servers, and the view of the
// ServiceCIDRs and IPAddresses (IPView) adds the other ServiceCIDRs'
// ranges and frees what other API servers released. NodePorts are right
// while one API server writes Services. All types are safe for
// concurrent use.
//
// The error values and messages match upstream's, since they reach
// clients inside 422 and 500 responses: "provided IP is already
// allocated", "the provided network does not match the current range",
// "range is full", "provided port is already allocated", "provided port
// is not in the valid range...".
package allocator
