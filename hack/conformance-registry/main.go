// Command conformance-registry serves the conformance images as an OCI
// registry, for a cluster with no other: hack/conformance.sh runs it on the
// cluster's bridge and maps registry.k8s.io to it in each agent's
// registries.yaml, so that a pull the suite asks for (an image volume or a
// container with pull policy Always) is served as from registry.k8s.io.
// Every docker-archive tarball in -images is pushed under each of its tags
// without the registry host (registry.k8s.io/e2e-test-images/kitten:1.8 is
// e2e-test-images/kitten:1.8 here); blobs are kept in -dir.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	images := flag.String("images", "", "directory of docker-archive tarballs to serve")
	dir := flag.String("dir", "", "directory for the registry's blobs")
	flag.Parse()
	if err := run(*addr, *images, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "conformance-registry:", err)
		os.Exit(1)
	}
}

func run(addr, images, dir string) error {
	if images == "" || dir == "" {
		return errors.New("-images and -dir are required")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: registry.New(registry.WithBlobHandler(registry.NewDiskBlobHandler(dir)), registry.Logger(log.New(io.Discard, "", 0)))}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	host := ln.Addr().String()
	files, err := filepath.Glob(filepath.Join(images, "*.tar"))
	if err != nil {
		return err
	}
	for _, f := range files {
		refs, err := push(f, host)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		fmt.Println(f, refs)
	}
	fmt.Println("serving on", host)
	return <-served
}

// push writes every tagged image of a docker-archive tarball to the
// registry at host and returns the names it pushed.
func push(file, host string) ([]string, error) {
	open := tarball.Opener(func() (io.ReadCloser, error) { return os.Open(file) })
	manifest, err := tarball.LoadManifest(open)
	if err != nil {
		return nil, err
	}
	var pushed []string
	for _, desc := range manifest {
		for _, t := range desc.RepoTags {
			src, err := name.NewTag(t)
			if err != nil {
				return nil, err
			}
			img, err := tarball.Image(open, &src)
			if err != nil {
				return nil, err
			}
			dst, err := name.NewTag(host+"/"+src.Context().RepositoryStr()+":"+src.TagStr(), name.Insecure)
			if err != nil {
				return nil, err
			}
			if err := remote.Write(dst, img); err != nil {
				return nil, err
			}
			pushed = append(pushed, dst.String())
		}
	}
	return pushed, nil
}
