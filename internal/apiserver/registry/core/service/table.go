package service

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

func tableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		{Name: "Type", Type: "string", Description: corev1.ServiceSpec{}.SwaggerDoc()["type"]},
		{Name: "Cluster-IP", Type: "string", Description: corev1.ServiceSpec{}.SwaggerDoc()["clusterIP"]},
		{Name: "External-IP", Type: "string", Description: corev1.ServiceSpec{}.SwaggerDoc()["externalIPs"]},
		{Name: "Port(s)", Type: "string", Description: corev1.ServiceSpec{}.SwaggerDoc()["ports"]},
		{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
		{Name: "Selector", Type: "string", Priority: 1, Description: corev1.ServiceSpec{}.SwaggerDoc()["selector"]},
	}
}

func tableRow(svc *corev1.Service) []interface{} {
	clusterIP := "<none>"
	if len(svc.Spec.ClusterIPs) > 0 {
		clusterIP = svc.Spec.ClusterIPs[0]
	}
	ports := portsString(svc.Spec.Ports)
	if ports == "" {
		ports = "<none>"
	}
	return []interface{}{
		svc.Name, string(svc.Spec.Type), clusterIP, externalIP(svc), ports,
		registry.Age(svc.CreationTimestamp), labels.FormatLabels(svc.Spec.Selector),
	}
}

// portsString renders ports as kubectl does: "80/TCP,443:30443/TCP".
func portsString(ports []corev1.ServicePort) string {
	parts := make([]string, len(ports))
	for i, p := range ports {
		if p.NodePort > 0 {
			parts[i] = fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, p.Protocol)
		} else {
			parts[i] = fmt.Sprintf("%d/%s", p.Port, p.Protocol)
		}
	}
	return strings.Join(parts, ",")
}

// externalIP renders the EXTERNAL-IP column; server-side tables are wide,
// so load balancer addresses are not shortened.
func externalIP(svc *corev1.Service) string {
	switch svc.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort:
		if len(svc.Spec.ExternalIPs) > 0 {
			return strings.Join(svc.Spec.ExternalIPs, ",")
		}
		return "<none>"
	case corev1.ServiceTypeLoadBalancer:
		var all []string
		for _, ing := range svc.Status.LoadBalancer.Ingress {
			if ing.IP != "" {
				all = append(all, ing.IP)
			} else if ing.Hostname != "" {
				all = append(all, ing.Hostname)
			}
		}
		all = append(all, svc.Spec.ExternalIPs...)
		if len(all) == 0 {
			return "<pending>"
		}
		return strings.Join(all, ",")
	case corev1.ServiceTypeExternalName:
		return svc.Spec.ExternalName
	}
	return "<unknown>"
}
