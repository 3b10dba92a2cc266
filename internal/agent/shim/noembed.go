//go:build !skiffshim

package shim

// Without the skiffshim tag the binary carries no shim.
var binary, digest string
