// Package certrequest reads the x509 certificate request inside a
// CertificateSigningRequest. The approving and the signing controllers
// both need it; it lives here so that neither imports the other.
package certrequest

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
)

// Parse decodes the PEM "CERTIFICATE REQUEST" of a CSR and checks its
// signature.
func Parse(pemBytes []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("no PEM CERTIFICATE REQUEST block")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, err
	}
	if err := req.CheckSignature(); err != nil {
		return nil, err
	}
	return req, nil
}
