package health

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestComponents(t *testing.T) {
	ok := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer ok.Close()
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer plain.Close()
	sick := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "[-]leaderElection failed", http.StatusInternalServerError)
	}))
	defer sick.Close()
	// A port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "https://" + ln.Addr().String() + "/healthz"
	ln.Close()

	c := NewComponents()
	cases := []struct {
		name, url string
		check     func(context.Context) error
		wantErr   string
	}{
		{name: "https healthy", url: ok.URL + "/healthz"},
		{name: "plain http healthy", url: "https://" + strings.TrimPrefix(plain.URL, "http://") + "/healthz"},
		{name: "unhealthy", url: sick.URL + "/healthz", wantErr: "500"},
		{name: "not running", url: closed, wantErr: "connection refused"},
		{name: "in process", check: func(context.Context) error { return nil }},
		{name: "in process, stopped", check: func(context.Context) error { return errors.New("scheduler stopped") }, wantErr: "scheduler stopped"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.check != nil {
				c.Set("x", tc.check)
			} else {
				c.SetURL("x", tc.url)
			}
			err := c.Check(context.Background(), "x")
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("got %v, want healthy", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("got %v, want an error with %q", err, tc.wantErr)
			}
		})
	}
}
