package api

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAutoCertMadeOnceAndKept(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	cfg, err := TLSConfig(TLSOptions{Auto: true, Dir: dir, Hosts: []string{"pith.local", "192.168.1.10", "0.0.0.0"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cfg.Certificates[0].Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"localhost", "127.0.0.1", "pith.local", "192.168.1.10"} {
		if err := leaf.VerifyHostname(h); err != nil {
			t.Errorf("certificate does not cover %s: %v", h, err)
		}
	}
	if leaf.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("key algorithm %v, want ECDSA", leaf.PublicKeyAlgorithm)
	}
	st, err := os.Stat(filepath.Join(dir, autoKeyName))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", st.Mode().Perm())
	}
	// Same hosts: the kept certificate is reused.
	cfg2, err := TLSConfig(TLSOptions{Auto: true, Dir: dir, Hosts: []string{"192.168.1.10", "pith.local"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(cfg2.Certificates[0].Certificate[0]) != string(cfg.Certificates[0].Certificate[0]) {
		t.Error("certificate remade though still valid")
	}
	// A new host: remade.
	cfg3, err := TLSConfig(TLSOptions{Auto: true, Dir: dir, Hosts: []string{"10.0.0.7"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(cfg3.Certificates[0].Certificate[0]) == string(cfg.Certificates[0].Certificate[0]) {
		t.Error("certificate kept though it does not cover the new host")
	}
	// Near expiry: remade.
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, autoCertName), filepath.Join(dir, autoKeyName))
	if err != nil {
		t.Fatal(err)
	}
	if why := autoStale(cert, autoHosts([]string{"10.0.0.7"}), time.Now().Add(autoValidity)); !strings.Contains(why, "expires") {
		t.Errorf("autoStale near expiry = %q", why)
	}
}

func TestTLSConfigErrors(t *testing.T) {
	if cfg, err := TLSConfig(TLSOptions{}, nil); cfg != nil || err != nil {
		t.Errorf("no TLS: %v, %v", cfg, err)
	}
	tests := []struct {
		opts TLSOptions
		want string
	}{
		{TLSOptions{Auto: true, CertFile: "c", KeyFile: "k"}, "choose one"},
		{TLSOptions{CertFile: "c"}, "needs its key"},
		{TLSOptions{CertFile: "/nonexistent/c", KeyFile: "/nonexistent/k"}, "load tls certificate /nonexistent/c"},
		{TLSOptions{Auto: true}, "needs a directory"},
	}
	for _, tt := range tests {
		_, err := TLSConfig(tt.opts, nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: err %v, want %q", tt.opts, err, tt.want)
		}
	}
}

// TestServeWithTLS serves over TLS from files made by tls = "auto" and
// reads an answer with a client trusting only that certificate.
func TestServeWithTLS(t *testing.T) {
	dir := t.TempDir()
	if _, err := TLSConfig(TLSOptions{Auto: true, Dir: dir}, nil); err != nil {
		t.Fatal(err)
	}
	cfg, err := TLSConfig(TLSOptions{CertFile: filepath.Join(dir, autoCertName), KeyFile: filepath.Join(dir, autoKeyName)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeWith(ctx, ln, okHandler, DefaultServerLimits(), cfg, nil) }()

	pool := x509.NewCertPool()
	pem, err := os.ReadFile(filepath.Join(dir, autoCertName))
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(pem)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	for _, host := range []string{"127.0.0.1", "localhost"} {
		resp, err := client.Get("https://" + net.JoinHostPort(host, port) + "/")
		if err != nil {
			t.Fatalf("https to %s: %v", host, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("status %d: %s", resp.StatusCode, body)
		}
	}
	client.CloseIdleConnections()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("ServeWith: %v", err)
	}
}
