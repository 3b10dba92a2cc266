package server

import (
	"context"
	"errors"
	"sync"

	internalapi "k8s.io/cri-api/pkg/apis"
)

// Node runs the two parts of this package a node agent needs beside its
// kubelet: the kubelet API server and the container log rotator. The agent
// launches it as one component.
type Node struct {
	Server  *Server
	Rotator *LogRotator
}

// NewNode builds both; it has no side effects until Start.
func NewNode(host Host, runtime internalapi.RuntimeService, images internalapi.ImageManagerService, opts Options, rotation RotatorOptions) (*Node, error) {
	srv, err := New(host, runtime, images, opts)
	if err != nil {
		return nil, err
	}
	rot, err := NewLogRotator(runtime, rotation)
	if err != nil {
		return nil, err
	}
	return &Node{Server: srv, Rotator: rot}, nil
}

// Ready is closed once the API server listens.
func (n *Node) Ready() <-chan struct{} { return n.Server.Ready() }

// Start runs both until ctx is done or one of them fails.
func (n *Node) Start(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, start := range []func(context.Context) error{n.Server.Start, n.Rotator.Start} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = start(ctx)
			cancel()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
