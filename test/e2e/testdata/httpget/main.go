// httpget is the e2e tests' curl for busybox pods (whose wget speaks no TLS
// a Go 1.26 server accepts): it GETs a URL every second with the bearer
// token read from a file at each try, verifying the server with a CA file,
// and prints "STATUS <code> <start of body>" or "STATUS ERROR <error>".
package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func main() {
	ca := flag.String("ca", "", "CA file")
	tokenFile := flag.String("token-file", "", "bearer token file")
	flag.Parse()
	pool := x509.NewCertPool()
	if b, err := os.ReadFile(*ca); err == nil {
		pool.AppendCertsFromPEM(b)
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	for {
		tok, _ := os.ReadFile(*tokenFile)
		req, _ := http.NewRequest("GET", flag.Arg(0), nil)
		req.Header.Set("Authorization", "Bearer "+string(tok))
		resp, err := client.Do(req)
		if err != nil {
			fmt.Printf("STATUS ERROR %v\n", err)
		} else {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 60))
			resp.Body.Close()
			fmt.Printf("STATUS %d %s\n", resp.StatusCode, b)
		}
		time.Sleep(time.Second)
	}
}
