package opcua

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"time"
)

// CertOptions describe an application instance certificate.
type CertOptions struct {
	// URI is the application URI, put in the subject alternative names;
	// servers check it against the client's ApplicationURI.
	URI string
	// Hosts are the DNS names and IP addresses of the machine.
	Hosts []string
	// Validity is how long the certificate is valid from now.
	Validity time.Duration
	// Bits is the RSA key size; Basic256Sha256 wants 2048 to 4096.
	Bits int
}

// DefaultCertOptions returns a 2048-bit, 10-year certificate for
// "urn:pith:HOST" naming host.
func DefaultCertOptions(host string) CertOptions {
	return CertOptions{URI: "urn:pith:" + host, Hosts: []string{host}, Validity: 10 * 365 * 24 * time.Hour, Bits: 2048}
}

// NewCertificate makes a self-signed application instance certificate
// (OPC UA Part 6, 6.2.2) and returns it and its RSA key as PEM.
func NewCertificate(o CertOptions) (certPEM, keyPEM []byte, err error) {
	if o.Bits < 2048 {
		return nil, nil, fmt.Errorf("make certificate: %d-bit keys are too short for Basic256Sha256 (at least 2048)", o.Bits)
	}
	u, err := url.Parse(o.URI)
	if err != nil || u.Scheme == "" {
		return nil, nil, fmt.Errorf("make certificate: application URI %q is not a URI", o.URI)
	}
	key, err := rsa.GenerateKey(rand.Reader, o.Bits)
	if err != nil {
		return nil, nil, fmt.Errorf("make certificate: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, nil, fmt.Errorf("make certificate: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "Pith", Organization: []string{"Pith"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(o.Validity),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageContentCommitment | x509.KeyUsageKeyEncipherment |
			x509.KeyUsageDataEncipherment | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		URIs:                  []*url.URL{u},
	}
	for _, h := range o.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("make certificate: %w", err)
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	return certPEM, keyPEM, nil
}
