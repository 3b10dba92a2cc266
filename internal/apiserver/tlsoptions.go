package apiserver

import "crypto/tls"

// tlsMinVersion is Config.TLSMinVersion, TLS 1.2 when unset.
func (s *Server) tlsMinVersion() uint16 {
	if s.cfg.TLSMinVersion == 0 {
		return tls.VersionTLS12
	}
	return s.cfg.TLSMinVersion
}
