package pki

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// AdminKubeconfigFile is the admin kubeconfig's name inside the data directory.
const AdminKubeconfigFile = "admin.kubeconfig"

// ClusterName is the cluster, user and context name in generated kubeconfigs.
const ClusterName = "skiff"

// ServerURL is the https URL of an API server on host and port.
func ServerURL(host string, port int) string {
	return "https://" + net.JoinHostPort(host, strconv.Itoa(port))
}

// AdminKubeconfig builds a kubeconfig for the admin user with embedded
// certificate data, pointing at server.
func (b *Bundle) AdminKubeconfig(server string) *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[ClusterName] = &clientcmdapi.Cluster{
		Server:                   server,
		CertificateAuthorityData: b.CAPEM,
	}
	cfg.AuthInfos[ClusterName] = &clientcmdapi.AuthInfo{
		ClientCertificateData: b.AdminCertPEM,
		ClientKeyData:         b.AdminKeyPEM,
	}
	cfg.Contexts[ClusterName] = &clientcmdapi.Context{
		Cluster:   ClusterName,
		AuthInfo:  ClusterName,
		Namespace: "default",
	}
	cfg.CurrentContext = ClusterName
	return cfg
}

// WriteAdminKubeconfig writes the admin kubeconfig to path with mode 0600.
func (b *Bundle) WriteAdminKubeconfig(path, server string) error {
	data, err := clientcmd.Write(*b.AdminKubeconfig(server))
	if err != nil {
		return fmt.Errorf("encode kubeconfig: %w", err)
	}
	return writeFile(path, data)
}

// AdminRESTConfig is a client-go config for the admin user against server.
func (b *Bundle) AdminRESTConfig(server string) *rest.Config {
	return &rest.Config{
		Host: server,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   append([]byte(nil), b.CAPEM...),
			CertData: append([]byte(nil), b.AdminCertPEM...),
			KeyData:  append([]byte(nil), b.AdminKeyPEM...),
		},
		QPS:   100,
		Burst: 200,
	}
}

// WriteFileKubeconfig writes to path a kubeconfig for the client
// certificate <pkiDir>/<name>.crt (and .key) that the server issued,
// referring to the files rather than embedding them, so that a renewed
// certificate is picked up; user and context are named name.
func WriteFileKubeconfig(path, server, pkiDir, name string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters[ClusterName] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: filepath.Join(pkiDir, "ca.crt")}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificate: filepath.Join(pkiDir, name+".crt"), ClientKey: filepath.Join(pkiDir, name+".key")}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: ClusterName, AuthInfo: name}
	kc.CurrentContext = name
	return clientcmd.WriteToFile(*kc, path)
}
