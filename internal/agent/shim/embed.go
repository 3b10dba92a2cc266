//go:build skiffshim

package shim

import _ "embed"

// binary is the shim executable and digest its SHA-256 (hex), both written
// by build.sh.
var (
	//go:embed containerd-shim-runc-v2
	binary string
	//go:embed containerd-shim-runc-v2.sha256
	digest string
)
