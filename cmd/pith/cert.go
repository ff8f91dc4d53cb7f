package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pith-historian/pith/internal/acq/opcua"
	"github.com/pith-historian/pith/internal/config"
)

// runCert makes Pith's OPC UA application instance certificate, or with
// --trust fetches a server's certificate into a trust directory.
func runCert(args []string) error {
	fs := flag.NewFlagSet("cert", flag.ContinueOnError)
	dir := fs.String("dir", ".", "directory to write cert.pem and key.pem into")
	host, _ := os.Hostname()
	hosts := fs.String("hosts", host, "comma-separated DNS names and IP addresses of this machine")
	uri := fs.String("uri", "", "application URI (default urn:pith:HOST)")
	days := fs.Int("days", 3650, "validity in days")
	bits := fs.Int("bits", 2048, "RSA key size (2048 to 4096)")
	trust := fs.String("trust", "", "instead: fetch the certificate of the server at this endpoint (opc.tcp://host:port) into --dir, after showing its thumbprint")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: pith cert [--dir DIR] [--hosts H1,H2] [--uri URI] [--days N]\n       pith cert --trust opc.tcp://host:port --dir TRUSTDIR\n\n"+
			"Makes Pith's OPC UA application instance certificate (self-signed, RSA) as DIR/cert.pem and\nDIR/key.pem, for the certificate and private_key keys of [[opcua.client]]. With --trust it\nwrites the server's certificate into the trust directory instead.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagErr(err)
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return errors.New("unexpected arguments")
	}
	if *trust != "" {
		return trustServer(*trust, *dir)
	}
	o := opcua.DefaultCertOptions(host)
	o.Hosts = nil
	for _, h := range strings.Split(*hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			o.Hosts = append(o.Hosts, h)
		}
	}
	if *uri != "" {
		o.URI = *uri
	} else if len(o.Hosts) > 0 {
		o.URI = "urn:pith:" + o.Hosts[0]
	}
	o.Validity = time.Duration(*days) * 24 * time.Hour
	o.Bits = *bits
	certFile, keyFile := filepath.Join(*dir, "cert.pem"), filepath.Join(*dir, "key.pem")
	for _, f := range []string{certFile, keyFile} {
		if _, err := os.Stat(f); err == nil {
			return fmt.Errorf("%s exists: remove it first (servers that trust the old certificate must be told of the new one)", f)
		}
	}
	certPEM, keyPEM, err := opcua.NewCertificate(o)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(certFile, certPEM, 0o644); err != nil {
		return err
	}
	p, _ := pem.Decode(certPEM)
	fmt.Printf("# Application URI %s, SHA-1 thumbprint %s.\n# Servers must trust this certificate (copy %s into their trusted folder).\ncertificate = %q\nprivate_key = %q\n",
		o.URI, opcua.Thumbprint(p.Bytes), certFile, certFile, keyFile)
	return nil
}

// trustServer writes the certificate the server presents on its
// Basic256Sha256 endpoints into dir.
func trustServer(endpoint, dir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	der, err := opcua.ServerCertificate(ctx, opcuaEndpoint(endpoint), config.OPCUAPolicyBasic256Sha256, config.OPCUAModeSignAndEncrypt)
	if err != nil {
		der, err = opcua.ServerCertificate(ctx, opcuaEndpoint(endpoint), config.OPCUAPolicyBasic256Sha256, config.OPCUAModeSign)
	}
	if err != nil {
		return err
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return fmt.Errorf("parse server certificate: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	thumb := opcua.Thumbprint(der)
	f := filepath.Join(dir, thumb+".der")
	if err := os.WriteFile(f, der, 0o644); err != nil {
		return err
	}
	fmt.Printf("# Wrote %s: subject %q, SHA-1 thumbprint %s.\n# Check the thumbprint against the server's own display before relying on it.\n", f, c.Subject.String(), thumb)
	return nil
}

// opcuaEndpoint accepts opcua://host:port[/path] as a spelling of the
// opc.tcp endpoint URL.
func opcuaEndpoint(s string) string {
	if rest, ok := strings.CutPrefix(s, "opcua://"); ok {
		return "opc.tcp://" + rest
	}
	return s
}
