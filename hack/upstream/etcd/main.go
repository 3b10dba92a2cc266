// Command etcd is etcd's own server (etcdmain), at the version the
// kubernetes module pins, for the e2e suite's etcd image (the sample
// API server's storage in the aggregator test).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
