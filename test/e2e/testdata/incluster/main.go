// incluster is a client-go program as a user would run one in a pod: it
// builds its client with rest.InClusterConfig (KUBERNETES_SERVICE_HOST and
// _PORT from the kubelet, the mounted service-account token and ca.crt),
// asks the API server who it is, and lists the namespace's configmaps. It
// prints "HOST", "USER" and "LIST" lines and exits.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authnclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	coreclient "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
)

func main() {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		fmt.Printf("CONFIG ERROR %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("HOST %s\n", cfg.Host)
	// Two typed clients rather than the whole clientset: the same code
	// path, a fraction of the build.
	authn, err := authnclient.NewForConfig(cfg)
	if err != nil {
		fmt.Printf("CLIENT ERROR %v\n", err)
		os.Exit(1)
	}
	core, err := coreclient.NewForConfig(cfg)
	if err != nil {
		fmt.Printf("CLIENT ERROR %v\n", err)
		os.Exit(1)
	}
	ctx := context.Background()
	r, err := authn.SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		fmt.Printf("USER ERROR %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("USER %s GROUPS %s\n", r.Status.UserInfo.Username, strings.Join(r.Status.UserInfo.Groups, ","))
	ns, _ := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	list, err := core.ConfigMaps(string(ns)).List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Printf("LIST ERROR %v\n", err)
		os.Exit(1)
	}
	var names []string
	for _, cm := range list.Items {
		names = append(names, cm.Name)
	}
	fmt.Printf("LIST %s\n", strings.Join(names, ","))
}
