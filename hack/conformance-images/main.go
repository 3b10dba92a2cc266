// Command conformance-images writes the container images upstream's
// conformance tests use (see internal/testing/images.ConformanceImages) as
// docker-archive tarballs, for a node agent to import. hack/conformance.sh
// runs it; the programs and Debian packages it packs are its inputs.
package main

import (
	"flag"
	"fmt"
	"os"

	testimages "github.com/skiff-sh/skiff/internal/testing/images"
)

func main() {
	var src testimages.ConformanceSources
	flag.StringVar(&src.Busybox, "busybox", "", "static busybox built from upstream's source (optional: else the host's, with bash as sh)")
	flag.StringVar(&src.Agnhost, "agnhost", "", "static agnhost binary")
	flag.StringVar(&src.Nnp, "nnp", "", "static nonewprivs (nnp) binary")
	flag.StringVar(&src.SampleAPIServer, "sample-apiserver", "", "static sample-apiserver binary (optional)")
	flag.StringVar(&src.Etcd, "etcd", "", "static etcd binary (optional)")
	flag.StringVar(&src.KubeImages, "kube-images", "", "k8s.io/kubernetes's test/images directory")
	flag.StringVar(&src.DebRoot, "deb-root", "", "directory with the Debian packages unpacked (dpkg -x)")
	out := flag.String("out", "", "directory to write the tarballs into")
	flag.Parse()
	if err := run(src, *out); err != nil {
		fmt.Fprintln(os.Stderr, "conformance-images:", err)
		os.Exit(1)
	}
}

func run(src testimages.ConformanceSources, out string) error {
	if out == "" || src.Agnhost == "" || src.Nnp == "" || src.KubeImages == "" || src.DebRoot == "" {
		return fmt.Errorf("-agnhost, -nnp, -kube-images, -deb-root and -out are required")
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	specs, err := testimages.ConformanceImages(src)
	if err != nil {
		return err
	}
	for _, s := range specs {
		p, err := s.WriteTo(out)
		if err != nil {
			return err
		}
		fmt.Println(p, s.Refs)
	}
	return nil
}
