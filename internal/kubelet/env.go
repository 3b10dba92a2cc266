package kubelet

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/skiff-sh/skiff/internal/kubelet/volume"
)

// expand replaces $(NAME) references by the value of NAME as upstream's
// expansion does: $$ is a literal $, and an unknown reference stays as it
// is.
func expand(in string, lookup func(string) (string, bool)) string {
	var b strings.Builder
	for i := 0; i < len(in); i++ {
		if in[i] != '$' || i+1 >= len(in) {
			b.WriteByte(in[i])
			continue
		}
		switch in[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(in[i+2:], ')')
			if end < 0 {
				b.WriteString(in[i:])
				return b.String()
			}
			name := in[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString(in[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// envError is a container's env that cannot be built (a missing ConfigMap
// or key): the container waits with CreateContainerConfigError.
type envError struct{ msg string }

func (e *envError) Error() string { return e.msg }

// serviceEnv returns the docker-links style variables of the services
// visible to the pod: those of its namespace (with enableServiceLinks) and
// the master service default/kubernetes, as upstream.
func (k *Kubelet) serviceEnv(pod *corev1.Pod) map[string]string {
	out := map[string]string{}
	if k.serviceLister == nil {
		return out
	}
	services, err := k.serviceLister.List(labels.Everything())
	if err != nil {
		return out
	}
	links := pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks
	sort.Slice(services, func(i, j int) bool { return services[i].Name < services[j].Name })
	var chosen []*corev1.Service
	for _, s := range services {
		if s.Spec.ClusterIP == "" || s.Spec.ClusterIP == corev1.ClusterIPNone {
			continue
		}
		if s.Namespace == pod.Namespace && links {
			chosen = append(chosen, s)
		} else if s.Namespace == "default" && s.Name == "kubernetes" {
			chosen = append(chosen, s)
		}
	}
	for _, s := range chosen {
		name := strings.ToUpper(strings.ReplaceAll(s.Name, "-", "_"))
		if len(s.Spec.Ports) == 0 {
			continue
		}
		out[name+"_SERVICE_HOST"] = s.Spec.ClusterIP
		out[name+"_SERVICE_PORT"] = strconv.Itoa(int(s.Spec.Ports[0].Port))
		for _, p := range s.Spec.Ports {
			if p.Name != "" {
				out[name+"_SERVICE_PORT_"+strings.ToUpper(strings.ReplaceAll(p.Name, "-", "_"))] = strconv.Itoa(int(p.Port))
			}
		}
		first := s.Spec.Ports[0]
		proto := strings.ToLower(string(first.Protocol))
		if proto == "" {
			proto = "tcp"
		}
		out[name+"_PORT"] = fmt.Sprintf("%s://%s", proto, net.JoinHostPort(s.Spec.ClusterIP, strconv.Itoa(int(first.Port))))
		for _, p := range s.Spec.Ports {
			pr := strings.ToUpper(string(p.Protocol))
			if pr == "" {
				pr = "TCP"
			}
			prefix := fmt.Sprintf("%s_PORT_%d_%s", name, p.Port, pr)
			out[prefix] = fmt.Sprintf("%s://%s", strings.ToLower(pr), net.JoinHostPort(s.Spec.ClusterIP, strconv.Itoa(int(p.Port))))
			out[prefix+"_PROTO"] = strings.ToLower(pr)
			out[prefix+"_PORT"] = strconv.Itoa(int(p.Port))
			out[prefix+"_ADDR"] = s.Spec.ClusterIP
		}
	}
	return out
}

// makeEnv builds a container's environment in upstream's order: service
// variables, then envFrom, then env (later entries win), with $(VAR)
// references expanded against the variables defined before them.
func (k *Kubelet) makeEnv(ctx context.Context, pod *corev1.Pod, c *corev1.Container, podIPs []string) ([][2]string, error) {
	vars := map[string]string{}
	var order []string
	set := func(name, v string) {
		if _, ok := vars[name]; !ok {
			order = append(order, name)
		}
		vars[name] = v
	}
	svc := k.serviceEnv(pod)
	svcNames := make([]string, 0, len(svc))
	for n := range svc {
		svcNames = append(svcNames, n)
	}
	sort.Strings(svcNames)

	cms := map[string]*corev1.ConfigMap{}
	secrets := map[string]*corev1.Secret{}
	getCM := func(name string, optional bool) (*corev1.ConfigMap, error) {
		if cm, ok := cms[name]; ok {
			return cm, nil
		}
		cm, err := k.ConfigMap(ctx, pod.Namespace, name)
		if err != nil {
			if apierrors.IsNotFound(err) {
				if optional {
					return nil, nil
				}
				return nil, &envError{fmt.Sprintf("configmap %q not found", name)}
			}
			return nil, err
		}
		cms[name] = cm
		return cm, nil
	}
	getSecret := func(name string, optional bool) (*corev1.Secret, error) {
		if s, ok := secrets[name]; ok {
			return s, nil
		}
		s, err := k.Secret(ctx, pod.Namespace, name)
		if err != nil {
			if apierrors.IsNotFound(err) {
				if optional {
					return nil, nil
				}
				return nil, &envError{fmt.Sprintf("secret %q not found", name)}
			}
			return nil, err
		}
		secrets[name] = s
		return s, nil
	}

	for _, ef := range c.EnvFrom {
		switch {
		case ef.ConfigMapRef != nil:
			opt := ef.ConfigMapRef.Optional != nil && *ef.ConfigMapRef.Optional
			cm, err := getCM(ef.ConfigMapRef.Name, opt)
			if err != nil {
				return nil, err
			}
			if cm == nil {
				continue
			}
			keys := make([]string, 0, len(cm.Data))
			for key := range cm.Data {
				keys = append(keys, key)
			}
			sort.Strings(keys)
			for _, key := range keys {
				set(ef.Prefix+key, cm.Data[key])
			}
		case ef.SecretRef != nil:
			opt := ef.SecretRef.Optional != nil && *ef.SecretRef.Optional
			s, err := getSecret(ef.SecretRef.Name, opt)
			if err != nil {
				return nil, err
			}
			if s == nil {
				continue
			}
			keys := make([]string, 0, len(s.Data))
			for key := range s.Data {
				keys = append(keys, key)
			}
			sort.Strings(keys)
			for _, key := range keys {
				set(ef.Prefix+key, string(s.Data[key]))
			}
		}
	}

	lookup := func(name string) (string, bool) {
		if v, ok := vars[name]; ok {
			return v, true
		}
		v, ok := svc[name]
		return v, ok
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expand(e.Value, lookup))
			continue
		}
		vf := e.ValueFrom
		switch {
		case vf.ConfigMapKeyRef != nil:
			opt := vf.ConfigMapKeyRef.Optional != nil && *vf.ConfigMapKeyRef.Optional
			cm, err := getCM(vf.ConfigMapKeyRef.Name, opt)
			if err != nil {
				return nil, err
			}
			if cm == nil {
				continue
			}
			v, ok := cm.Data[vf.ConfigMapKeyRef.Key]
			if !ok {
				if opt {
					continue
				}
				return nil, &envError{fmt.Sprintf("couldn't find key %s in ConfigMap %s/%s", vf.ConfigMapKeyRef.Key, pod.Namespace, vf.ConfigMapKeyRef.Name)}
			}
			set(e.Name, v)
		case vf.SecretKeyRef != nil:
			opt := vf.SecretKeyRef.Optional != nil && *vf.SecretKeyRef.Optional
			s, err := getSecret(vf.SecretKeyRef.Name, opt)
			if err != nil {
				return nil, err
			}
			if s == nil {
				continue
			}
			v, ok := s.Data[vf.SecretKeyRef.Key]
			if !ok {
				if opt {
					continue
				}
				return nil, &envError{fmt.Sprintf("couldn't find key %s in Secret %s/%s", vf.SecretKeyRef.Key, pod.Namespace, vf.SecretKeyRef.Name)}
			}
			set(e.Name, string(v))
		case vf.FieldRef != nil:
			v, err := k.podField(pod, vf.FieldRef.FieldPath, podIPs)
			if err != nil {
				return nil, &envError{err.Error()}
			}
			set(e.Name, v)
		case vf.ResourceFieldRef != nil:
			v, err := volume.ResourceField(pod, c.Name, vf.ResourceFieldRef, k.allocatable())
			if err != nil {
				return nil, &envError{err.Error()}
			}
			set(e.Name, v)
		}
	}
	out := make([][2]string, 0, len(svcNames)+len(order))
	for _, n := range svcNames {
		if _, overridden := vars[n]; !overridden {
			out = append(out, [2]string{n, svc[n]})
		}
	}
	for _, n := range order {
		out = append(out, [2]string{n, vars[n]})
	}
	return out, nil
}

// podField resolves the env var field paths (metadata, spec and status).
func (k *Kubelet) podField(pod *corev1.Pod, path string, podIPs []string) (string, error) {
	switch path {
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP":
		if ips := k.hostIPs(); len(ips) > 0 {
			return ips[0], nil
		}
		return "", nil
	case "status.hostIPs":
		return strings.Join(k.hostIPs(), ","), nil
	case "status.podIP":
		if len(podIPs) > 0 {
			return podIPs[0], nil
		}
		return "", nil
	case "status.podIPs":
		return strings.Join(podIPs, ","), nil
	}
	return volume.ObjectField(pod, path)
}
