package webhook

import (
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apiserver/pkg/admission/initializer"
	manifestloader "k8s.io/apiserver/pkg/admission/plugin/webhook/manifest/loader"

	"github.com/skiff-sh/skiff/internal/apiserver/registry/admissionregistration"
)

// The static manifests of a WebhookAdmissionConfiguration's
// staticManifestsDir: upstream's loader (files, YAML documents, v1 Lists,
// the .static.k8s.io name suffix, URL-only client configs, reloads) with
// Skiff's defaults and validation of webhook configurations, as
// kube-apiserver gives it its own.

var manifestCodecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	utilruntime.Must(admissionregistrationv1.AddToScheme(s))
	utilruntime.Must(metav1.AddMetaToScheme(s))
	metav1.AddToGroupVersion(s, metav1.SchemeGroupVersion)
	return serializer.NewCodecFactory(s, serializer.EnableStrict)
}()

func manifestLoaders() *initializer.ManifestLoaders {
	return &initializer.ManifestLoaders{
		LoadValidatingWebhookManifests: func(dir string) ([]*admissionregistrationv1.ValidatingWebhookConfiguration, string, error) {
			return manifestloader.LoadManifests(dir, manifestCodecs.UniversalDeserializer(), func(obj runtime.Object) ([]*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
				var items []*admissionregistrationv1.ValidatingWebhookConfiguration
				switch o := obj.(type) {
				case *admissionregistrationv1.ValidatingWebhookConfiguration:
					items = append(items, o)
				case *admissionregistrationv1.ValidatingWebhookConfigurationList:
					for i := range o.Items {
						items = append(items, &o.Items[i])
					}
				default:
					return nil, fmt.Errorf("unsupported resource type %T", obj)
				}
				for _, c := range items {
					admissionregistration.DefaultValidatingWebhookConfiguration(c)
					if errs := admissionregistration.ValidateValidatingWebhookConfiguration(c); len(errs) > 0 {
						return nil, fmt.Errorf("ValidatingWebhookConfiguration %q: %w", c.Name, errs.ToAggregate())
					}
				}
				return items, nil
			})
		},
		LoadMutatingWebhookManifests: func(dir string) ([]*admissionregistrationv1.MutatingWebhookConfiguration, string, error) {
			return manifestloader.LoadManifests(dir, manifestCodecs.UniversalDeserializer(), func(obj runtime.Object) ([]*admissionregistrationv1.MutatingWebhookConfiguration, error) {
				var items []*admissionregistrationv1.MutatingWebhookConfiguration
				switch o := obj.(type) {
				case *admissionregistrationv1.MutatingWebhookConfiguration:
					items = append(items, o)
				case *admissionregistrationv1.MutatingWebhookConfigurationList:
					for i := range o.Items {
						items = append(items, &o.Items[i])
					}
				default:
					return nil, fmt.Errorf("unsupported resource type %T", obj)
				}
				for _, c := range items {
					admissionregistration.DefaultMutatingWebhookConfiguration(c)
					if errs := admissionregistration.ValidateMutatingWebhookConfiguration(c); len(errs) > 0 {
						return nil, fmt.Errorf("MutatingWebhookConfiguration %q: %w", c.Name, errs.ToAggregate())
					}
				}
				return items, nil
			})
		},
	}
}
