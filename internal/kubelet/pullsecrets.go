package kubelet

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// pullAuth returns the credentials of the pod's imagePullSecrets that
// match the image's registry, best match first.
func (k *Kubelet) pullAuth(ctx context.Context, pod *corev1.Pod, image string) ([]*runtimeapi.AuthConfig, error) {
	host := registryHost(image)
	var out []*runtimeapi.AuthConfig
	for _, ref := range pod.Spec.ImagePullSecrets {
		s, err := k.Secret(ctx, pod.Namespace, ref.Name)
		if err != nil {
			continue
		}
		var cfg struct {
			Auths map[string]struct {
				Username string `json:"username"`
				Password string `json:"password"`
				Auth     string `json:"auth"`
			} `json:"auths"`
		}
		switch s.Type {
		case corev1.SecretTypeDockerConfigJson:
			_ = json.Unmarshal(s.Data[corev1.DockerConfigJsonKey], &cfg)
		case corev1.SecretTypeDockercfg:
			_ = json.Unmarshal(s.Data[corev1.DockerConfigKey], &cfg.Auths)
		default:
			continue
		}
		for server, a := range cfg.Auths {
			server = strings.TrimPrefix(strings.TrimPrefix(server, "https://"), "http://")
			server = strings.SplitN(server, "/", 2)[0]
			if server == "index.docker.io" || server == "registry-1.docker.io" {
				server = "docker.io"
			}
			if server != host {
				continue
			}
			// No ServerAddress, as upstream's kubelet: the host is matched
			// here, and containerd compares ServerAddress as a URL's host,
			// so "registry:5000" (no scheme) never matched and the
			// credentials were dropped ("no basic auth credentials").
			ac := &runtimeapi.AuthConfig{Username: a.Username, Password: a.Password}
			if a.Auth != "" && a.Username == "" {
				if b, err := base64.StdEncoding.DecodeString(a.Auth); err == nil {
					if u, p, ok := strings.Cut(string(b), ":"); ok {
						ac.Username, ac.Password = u, p
					}
				}
			}
			out = append(out, ac)
		}
	}
	return out, nil
}

// registryHost is the registry part of an image reference (docker.io when
// there is none).
func registryHost(image string) string {
	first, _, ok := strings.Cut(image, "/")
	if !ok || (!strings.ContainsAny(first, ".:") && first != "localhost") {
		return "docker.io"
	}
	return first
}
