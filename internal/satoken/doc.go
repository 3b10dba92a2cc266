// Package satoken signs and verifies service-account tokens: JSON Web
// Tokens carrying upstream's claims (kubernetes.io/serviceaccount), signed
// with the cluster's service-account key (RSA as RS256, ECDSA as
// ES256/384/512) whose key id is upstream's: the unpadded base64url SHA-256
// of the public key's PKIX encoding.
//
// Two token shapes exist, as upstream:
//   - bound tokens (TokenRequest): iss, aud, exp, iat, nbf, jti, sub
//     system:serviceaccount:<ns>:<name> and the private claim
//     "kubernetes.io" naming the namespace, the account, and the pod,
//     secret or node the token is bound to;
//   - legacy tokens (Secrets of type kubernetes.io/service-account-token):
//     iss "kubernetes/serviceaccount", no expiry, no audience, and the flat
//     kubernetes.io/serviceaccount/* claims.
//
// The package only does cryptography and claims; it looks nothing up. The
// API server's authenticator (internal/apiserver/authn) checks that the
// account and bound object still exist, and the tokens controller signs
// legacy tokens, so both import this package and neither imports the other.
package satoken
