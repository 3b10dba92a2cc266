// Package bootstrap creates the objects every cluster has from its first
// second: the system namespaces and the default/kubernetes Service with its
// Endpoints and EndpointSlice pointing at the API server. It works only
// through the API (client-go), is idempotent, and is shared by `skiff server`
// and the in-process test harness.
package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/scheduling"
	"github.com/skiff-sh/skiff/internal/localpath"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// SystemNamespaces returns the namespaces created at bootstrap, in order.
func SystemNamespaces() []string {
	return []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}
}

// Defaults.
const (
	DefaultServiceIP     = "10.43.0.1"
	DefaultRetryInterval = 500 * time.Millisecond
	// ServiceName is the API server's Service in the default namespace.
	ServiceName = "kubernetes"
	servicePort = 443
	portName    = "https"
)

// Options describe the API server that the kubernetes Service points at.
type Options struct {
	// Port is the port the API server listens on (required).
	Port int
	// EndpointIP is the address written into the Endpoints and
	// EndpointSlice (see AdvertiseAddress). When it is empty or unspecified
	// (0.0.0.0) those two objects are not written.
	EndpointIP string
	// ServiceIP is the ClusterIP of the kubernetes Service (default 10.43.0.1).
	ServiceIP string
	// RetryInterval is the pause between attempts in Run (default 500 ms).
	RetryInterval time.Duration
}

func (o Options) withDefaults() (Options, error) {
	if o.Port <= 0 || o.Port > 65535 {
		return o, fmt.Errorf("bootstrap: invalid API server port %d", o.Port)
	}
	if ip := net.ParseIP(o.EndpointIP); ip == nil || ip.IsUnspecified() {
		o.EndpointIP = ""
	}
	if o.ServiceIP == "" {
		o.ServiceIP = DefaultServiceIP
	}
	if o.RetryInterval <= 0 {
		o.RetryInterval = DefaultRetryInterval
	}
	return o, nil
}

// Run applies the bootstrap objects, retrying every RetryInterval until it
// succeeds or ctx is done; then it returns the last error.
func Run(ctx context.Context, client kubernetes.Interface, opts Options) error {
	opts, err := opts.withDefaults()
	if err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	for attempt := 1; ; attempt++ {
		err := Once(ctx, client, opts)
		if err == nil {
			logger.V(2).Info("Bootstrap done", "attempts", attempt)
			return nil
		}
		logger.V(2).Info("Bootstrap attempt failed, retrying", "attempt", attempt, "err", err)
		t := time.NewTimer(opts.RetryInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("bootstrap (%d attempts): %w", attempt, errors.Join(err, context.Cause(ctx)))
		case <-t.C:
		}
	}
}

// Once applies the bootstrap objects a single time.
func Once(ctx context.Context, client kubernetes.Interface, opts Options) error {
	opts, err := opts.withDefaults()
	if err != nil {
		return err
	}
	for _, name := range SystemNamespaces() {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", name, err)
		}
	}
	for _, pc := range scheduling.SystemPriorityClasses() {
		if _, err := client.SchedulingV1().PriorityClasses().Create(ctx, &pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create priority class %s: %w", pc.Name, err)
		}
	}
	// The built-in local-path provisioner's default class (k3s's); a
	// class the user changed is kept.
	if _, err := client.StorageV1().StorageClasses().Create(ctx, localpath.StorageClass(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create storage class %s: %w", localpath.ClassName, err)
	}
	if err := ensureService(ctx, client, opts); err != nil {
		return err
	}
	if opts.EndpointIP == "" {
		klog.FromContext(ctx).V(1).Info("No usable address for the kubernetes Endpoints; not writing them")
		return nil
	}
	if err := ensureEndpoints(ctx, client, opts); err != nil {
		return err
	}
	return ensureEndpointSlice(ctx, client, opts)
}

// Service is the desired default/kubernetes Service.
func Service(opts Options) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:      ServiceName,
			Namespace: metav1.NamespaceDefault,
			Labels:    map[string]string{"component": "apiserver", "provider": "kubernetes"},
		},
		Spec: corev1.ServiceSpec{
			Type:            corev1.ServiceTypeClusterIP,
			ClusterIP:       opts.ServiceIP,
			SessionAffinity: corev1.ServiceAffinityNone,
			Ports: []corev1.ServicePort{{
				Name:       portName,
				Protocol:   corev1.ProtocolTCP,
				Port:       servicePort,
				TargetPort: intstr.FromInt32(int32(opts.Port)),
			}},
		},
	}
}

// Endpoints is the desired default/kubernetes Endpoints.
func Endpoints(opts Options) *corev1.Endpoints {
	return &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{
			Name:      ServiceName,
			Namespace: metav1.NamespaceDefault,
			// The API server owns this EndpointSlice itself; the mirroring
			// controller must leave it alone.
			Labels: map[string]string{discoveryv1.LabelSkipMirror: "true"},
		},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: opts.EndpointIP}},
			Ports:     []corev1.EndpointPort{{Name: portName, Port: int32(opts.Port), Protocol: corev1.ProtocolTCP}},
		}},
	}
}

// EndpointSlice is the desired default/kubernetes EndpointSlice.
func EndpointSlice(opts Options) *discoveryv1.EndpointSlice {
	addrType := discoveryv1.AddressTypeIPv4
	if ip := net.ParseIP(opts.EndpointIP); ip != nil && ip.To4() == nil {
		addrType = discoveryv1.AddressTypeIPv6
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:      ServiceName,
			Namespace: metav1.NamespaceDefault,
			Labels:    map[string]string{discoveryv1.LabelServiceName: ServiceName},
		},
		AddressType: addrType,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{opts.EndpointIP},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		}},
		Ports: []discoveryv1.EndpointPort{{
			Name:     ptr.To(portName),
			Port:     ptr.To(int32(opts.Port)),
			Protocol: ptr.To(corev1.ProtocolTCP),
		}},
	}
}

func ensureService(ctx context.Context, client kubernetes.Interface, opts Options) error {
	want := Service(opts)
	svcs := client.CoreV1().Services(want.Namespace)
	cur, err := svcs.Get(ctx, want.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if _, err := svcs.Create(ctx, want, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create service default/kubernetes: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get service default/kubernetes: %w", err)
	}
	// Only the ports are reconciled: the API server's port may change
	// between runs, while the ClusterIP of an existing Service is immutable.
	if apiequality.Semantic.DeepEqual(cur.Spec.Ports, want.Spec.Ports) {
		return nil
	}
	upd := cur.DeepCopy()
	upd.Spec.Ports = want.Spec.Ports
	if _, err := svcs.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update service default/kubernetes: %w", err)
	}
	return nil
}

func ensureEndpoints(ctx context.Context, client kubernetes.Interface, opts Options) error {
	want := Endpoints(opts)
	eps := client.CoreV1().Endpoints(want.Namespace)
	cur, err := eps.Get(ctx, want.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if _, err := eps.Create(ctx, want, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create endpoints default/kubernetes: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get endpoints default/kubernetes: %w", err)
	}
	if apiequality.Semantic.DeepEqual(cur.Subsets, want.Subsets) && apiequality.Semantic.DeepEqual(cur.Labels, want.Labels) {
		return nil
	}
	upd := cur.DeepCopy()
	upd.Subsets, upd.Labels = want.Subsets, want.Labels
	if _, err := eps.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update endpoints default/kubernetes: %w", err)
	}
	return nil
}

func ensureEndpointSlice(ctx context.Context, client kubernetes.Interface, opts Options) error {
	want := EndpointSlice(opts)
	slices := client.DiscoveryV1().EndpointSlices(want.Namespace)
	cur, err := slices.Get(ctx, want.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if _, err := slices.Create(ctx, want, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create endpointslice default/kubernetes: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get endpointslice default/kubernetes: %w", err)
	}
	if cur.AddressType == want.AddressType &&
		apiequality.Semantic.DeepEqual(cur.Endpoints, want.Endpoints) &&
		apiequality.Semantic.DeepEqual(cur.Ports, want.Ports) &&
		apiequality.Semantic.DeepEqual(cur.Labels, want.Labels) {
		return nil
	}
	if cur.AddressType != want.AddressType {
		// addressType is immutable: replace the slice.
		if err := slices.Delete(ctx, want.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete endpointslice default/kubernetes: %w", err)
		}
		if _, err := slices.Create(ctx, want, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create endpointslice default/kubernetes: %w", err)
		}
		return nil
	}
	upd := cur.DeepCopy()
	upd.Endpoints, upd.Ports, upd.Labels = want.Endpoints, want.Ports, want.Labels
	if _, err := slices.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update endpointslice default/kubernetes: %w", err)
	}
	return nil
}
