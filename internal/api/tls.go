package api

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/pith-historian/pith/internal/atomicfile"
)

// TLSOptions say how the API listener speaks TLS.
type TLSOptions struct {
	CertFile string   // PEM certificate chain; with KeyFile, TLS from files
	KeyFile  string   // PEM private key of CertFile
	Auto     bool     // no files: a self-signed certificate made once into Dir
	Dir      string   // where Auto keeps its certificate (the data directory's tls/)
	Hosts    []string // names and IPs the Auto certificate must cover besides localhost and 127.0.0.1
}

// The self-signed certificate of tls = "auto".
const (
	autoCertName = "auto-cert.pem"
	autoKeyName  = "auto-key.pem"
	autoValidity = 10 * 365 * 24 * time.Hour // a box in a cabinet should not stop serving after a year
	autoRenewIn  = 30 * 24 * time.Hour       // remade when it expires sooner than this
)

// TLSConfig returns the server TLS configuration opts describe, or nil
// when they ask for plain HTTP. With Auto it reuses the certificate in
// Dir when it is still valid and covers every host, else it makes a new
// one (ECDSA P-256) and keeps it there; clients can then pin it. The
// certificate's SHA-256 fingerprint is logged so users can check it.
func TLSConfig(opts TLSOptions, log *slog.Logger) (*tls.Config, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var cert tls.Certificate
	var err error
	switch {
	case opts.CertFile != "" || opts.KeyFile != "":
		if opts.Auto {
			return nil, errors.New("configure tls: tls = \"auto\" and certificate files both given; choose one")
		}
		if opts.CertFile == "" || opts.KeyFile == "" {
			return nil, errors.New("configure tls: a certificate file needs its key file and the other way round")
		}
		cert, err = tls.LoadX509KeyPair(opts.CertFile, opts.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("load tls certificate %s: %w", opts.CertFile, err)
		}
	case opts.Auto:
		cert, err = autoCert(opts.Dir, autoHosts(opts.Hosts), time.Now(), log)
		if err != nil {
			return nil, err
		}
	default:
		return nil, nil
	}
	if len(cert.Certificate) > 0 {
		sum := sha256.Sum256(cert.Certificate[0])
		log.Info("tls certificate", "sha256", hex.EncodeToString(sum[:]))
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
	}, nil
}

// autoHosts adds localhost and 127.0.0.1 to hosts, drops empty and
// wildcard hosts and duplicates, and sorts them.
func autoHosts(hosts []string) []string {
	out := []string{"localhost", "127.0.0.1"}
	for _, h := range hosts {
		if h == "" || h == "0.0.0.0" || h == "::" {
			continue
		}
		out = append(out, h)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// autoCert loads the kept certificate or makes and keeps a new one.
func autoCert(dir string, hosts []string, now time.Time, log *slog.Logger) (tls.Certificate, error) {
	if dir == "" {
		return tls.Certificate{}, errors.New("configure tls: tls = \"auto\" needs a directory to keep its certificate")
	}
	certPath, keyPath := filepath.Join(dir, autoCertName), filepath.Join(dir, autoKeyName)
	cert, err := tls.LoadX509KeyPair(certPath, keyPath)
	switch {
	case err == nil:
		why := autoStale(cert, hosts, now)
		if why == "" {
			return cert, nil
		}
		log.Info("tls certificate remade", "why", why, "file", certPath)
	case errors.Is(err, fs.ErrNotExist):
		log.Info("tls certificate made", "file", certPath, "hosts", hosts)
	default:
		log.Warn("tls certificate unreadable; remade", "file", certPath, "err", err)
	}
	certPEM, keyPEM, err := makeSelfSigned(hosts, now)
	if err != nil {
		return tls.Certificate{}, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return tls.Certificate{}, fmt.Errorf("create tls directory: %w", err)
	}
	// The key goes first: a crash between the two writes then leaves a new
	// key beside an old certificate, which fails to load and is remade.
	if err := atomicfile.Write(keyPath, keyPEM, 0o600); err != nil {
		return tls.Certificate{}, err
	}
	if err := atomicfile.Write(certPath, certPEM, 0o644); err != nil {
		return tls.Certificate{}, err
	}
	cert, err = tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("load new tls certificate: %w", err)
	}
	return cert, nil
}

// autoStale says why a kept certificate must be remade, or "".
func autoStale(cert tls.Certificate, hosts []string, now time.Time) string {
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return "unparsable: " + err.Error()
	}
	if now.Add(autoRenewIn).After(leaf.NotAfter) {
		return "expires " + leaf.NotAfter.Format(time.DateOnly)
	}
	for _, h := range hosts {
		if leaf.VerifyHostname(h) != nil {
			return "does not cover " + h
		}
	}
	return ""
}

// makeSelfSigned returns a PEM certificate and key for hosts.
func makeSelfSigned(hosts []string, now time.Time) (certPEM, keyPEM []byte, err error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate tls key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, fmt.Errorf("generate certificate serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"Pith historian"}, CommonName: hosts[0]},
		NotBefore:             now.Add(-time.Hour), // tolerate a clock slightly behind
		NotAfter:              now.Add(autoValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true, // so clients can add it to their trust store as is
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		return nil, nil, fmt.Errorf("create certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, nil, fmt.Errorf("encode tls key: %w", err)
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	return certPEM, keyPEM, nil
}
