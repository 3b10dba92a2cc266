package node

import (
	"context"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// kind is the type of object whose relation to a node is asked.
type kind int

const (
	kindSecret kind = iota
	kindConfigMap
	kindPVC
	kindPV
	kindVA
	kindServiceAccount
	kindPod
	kindPCR
)

// hasPath reports whether the object (kind, namespace, name) is used by a
// pod bound to node, the edges of upstream's graph: pod → secret,
// configmap, PVC, service account; PVC → PV; PV → secret (CSI secret
// references); VolumeAttachment → node; PodCertificateRequest → node.
func (a *Authorizer) hasPath(ctx context.Context, node string, k kind, namespace, name string) (bool, error) {
	switch k {
	case kindVA:
		var va storagev1.VolumeAttachment
		if err := a.r.Get(ctx, gvrVAs, "", name, false, &va); err != nil {
			return false, err
		}
		return va.Spec.NodeName == node, nil
	case kindPV:
		var pv corev1.PersistentVolume
		if err := a.r.Get(ctx, gvrPVs, "", name, false, &pv); err != nil {
			return false, err
		}
		ref := pv.Spec.ClaimRef
		if ref == nil || ref.Name == "" {
			return false, nil
		}
		return a.hasPath(ctx, node, kindPVC, ref.Namespace, ref.Name)
	case kindPCR:
		var pcr certificatesv1.PodCertificateRequest
		if err := a.r.Get(ctx, gvrPCRs, namespace, name, false, &pcr); err != nil {
			return false, err
		}
		return string(pcr.Spec.NodeName) == node, nil
	case kindPod:
		var pod corev1.Pod
		if err := a.r.Get(ctx, gvrPods, namespace, name, false, &pod); err != nil {
			return false, err
		}
		return pod.Spec.NodeName == node, nil
	}
	pods, err := a.nodePods(ctx, node, namespace)
	if err != nil {
		return false, err
	}
	for i := range pods {
		if uses(&pods[i], k, name) {
			return true, nil
		}
	}
	if k == kindSecret {
		// Secrets a bound PV's CSI driver needs.
		for i := range pods {
			for _, claim := range claimNames(&pods[i]) {
				if ok, err := a.pvcUsesSecret(ctx, namespace, claim, name); err == nil && ok {
					return true, nil
				}
			}
		}
	}
	return false, nil
}

func (a *Authorizer) nodePods(ctx context.Context, node, namespace string) ([]corev1.Pod, error) {
	var l corev1.PodList
	if err := a.r.List(ctx, gvrPods, namespace, false, &l); err != nil {
		return nil, err
	}
	out := l.Items[:0]
	for _, p := range l.Items {
		if p.Spec.NodeName == node {
			out = append(out, p)
		}
	}
	return out, nil
}

func (a *Authorizer) pvcUsesSecret(ctx context.Context, namespace, claim, secret string) (bool, error) {
	var pvc corev1.PersistentVolumeClaim
	if err := a.r.Get(ctx, gvrPVCs, namespace, claim, false, &pvc); err != nil || pvc.Spec.VolumeName == "" {
		return false, err
	}
	var pv corev1.PersistentVolume
	if err := a.r.Get(ctx, gvrPVs, "", pvc.Spec.VolumeName, false, &pv); err != nil {
		return false, err
	}
	csi := pv.Spec.CSI
	if csi == nil {
		return false, nil
	}
	for _, ref := range []*corev1.SecretReference{csi.NodePublishSecretRef, csi.NodeStageSecretRef, csi.NodeExpandSecretRef, csi.ControllerPublishSecretRef, csi.ControllerExpandSecretRef} {
		if ref != nil && ref.Name == secret && (ref.Namespace == "" || ref.Namespace == namespace) {
			return true, nil
		}
	}
	return false, nil
}

// claimNames are the PVCs a pod mounts, generic ephemeral volumes included
// (their claim is <pod>-<volume>).
func claimNames(pod *corev1.Pod) []string {
	var out []string
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			out = append(out, v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			out = append(out, pod.Name+"-"+v.Name)
		}
	}
	return out
}

// uses reports whether pod refers to the object (k, name) of its own
// namespace.
func uses(pod *corev1.Pod, k kind, name string) bool {
	switch k {
	case kindServiceAccount:
		sa := pod.Spec.ServiceAccountName
		if sa == "" {
			sa = "default"
		}
		return sa == name
	case kindPVC:
		for _, c := range claimNames(pod) {
			if c == name {
				return true
			}
		}
		return false
	case kindSecret:
		for _, s := range pod.Spec.ImagePullSecrets {
			if s.Name == name {
				return true
			}
		}
	}
	for _, v := range pod.Spec.Volumes {
		if volumeUses(v.VolumeSource, k, name) {
			return true
		}
	}
	found := false
	visit := func(c *corev1.Container) {
		for _, e := range c.EnvFrom {
			if k == kindSecret && e.SecretRef != nil && e.SecretRef.Name == name ||
				k == kindConfigMap && e.ConfigMapRef != nil && e.ConfigMapRef.Name == name {
				found = true
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if k == kindSecret && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == name ||
				k == kindConfigMap && e.ValueFrom.ConfigMapKeyRef != nil && e.ValueFrom.ConfigMapKeyRef.Name == name {
				found = true
			}
		}
	}
	for i := range pod.Spec.InitContainers {
		visit(&pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		visit(&pod.Spec.Containers[i])
	}
	for i := range pod.Spec.EphemeralContainers {
		visit((*corev1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
	return found
}

func volumeUses(v corev1.VolumeSource, k kind, name string) bool {
	switch k {
	case kindSecret:
		switch {
		case v.Secret != nil && v.Secret.SecretName == name:
			return true
		case v.CSI != nil && v.CSI.NodePublishSecretRef != nil && v.CSI.NodePublishSecretRef.Name == name:
			return true
		case v.ISCSI != nil && v.ISCSI.SecretRef != nil && v.ISCSI.SecretRef.Name == name:
			return true
		case v.RBD != nil && v.RBD.SecretRef != nil && v.RBD.SecretRef.Name == name:
			return true
		case v.CephFS != nil && v.CephFS.SecretRef != nil && v.CephFS.SecretRef.Name == name:
			return true
		case v.FlexVolume != nil && v.FlexVolume.SecretRef != nil && v.FlexVolume.SecretRef.Name == name:
			return true
		case v.AzureFile != nil && v.AzureFile.SecretName == name:
			return true
		}
	case kindConfigMap:
		if v.ConfigMap != nil && v.ConfigMap.Name == name {
			return true
		}
	}
	if v.Projected != nil {
		for _, src := range v.Projected.Sources {
			if k == kindSecret && src.Secret != nil && src.Secret.Name == name ||
				k == kindConfigMap && src.ConfigMap != nil && src.ConfigMap.Name == name {
				return true
			}
		}
	}
	return false
}
