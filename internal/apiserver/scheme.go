package apiserver

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// codecs holds the scheme of every built-in type and the serializers the
// server speaks.
type codecs struct {
	scheme     *runtime.Scheme
	factory    serializer.CodecFactory
	json       *json.Serializer
	jsonStrict *json.Serializer
	yaml       *json.Serializer
	yamlStrict *json.Serializer
	protobuf   *protobuf.Serializer
	protoRaw   *protobuf.RawSerializer
}

func newCodecs() (*codecs, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := metricsv1beta1.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := apiregv1.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := metav1.AddMetaToScheme(s); err != nil {
		return nil, err
	}
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	mf := json.DefaultMetaFactory
	return &codecs{
		scheme:     s,
		factory:    serializer.NewCodecFactory(s),
		json:       json.NewSerializerWithOptions(mf, s, s, json.SerializerOptions{}),
		jsonStrict: json.NewSerializerWithOptions(mf, s, s, json.SerializerOptions{Strict: true}),
		yaml:       json.NewSerializerWithOptions(mf, s, s, json.SerializerOptions{Yaml: true}),
		yamlStrict: json.NewSerializerWithOptions(mf, s, s, json.SerializerOptions{Yaml: true, Strict: true}),
		protobuf:   protobuf.NewSerializer(s, s),
		protoRaw:   protobuf.NewRawSerializer(s, s),
	}, nil
}
