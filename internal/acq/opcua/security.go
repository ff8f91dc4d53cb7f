package opcua

import (
	"bytes"
	"context"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gopcua/opcua"
	"github.com/gopcua/opcua/ua"

	"github.com/pith-historian/pith/internal/config"
)

// ErrUntrusted is wrapped by the error of a connection refused because the
// server's certificate is not in the station's trust directory.
var ErrUntrusted = errors.New("server certificate not trusted")

// credentials are the application certificate (DER) and its key.
type credentials struct {
	cert []byte
	key  *rsa.PrivateKey
}

// loadCredentials reads the station's certificate and key, PEM or DER.
func loadCredentials(certFile, keyFile string) (credentials, error) {
	var c credentials
	b, err := os.ReadFile(certFile)
	if err != nil {
		return c, fmt.Errorf("read certificate: %w", err)
	}
	if p, _ := pem.Decode(b); p != nil {
		b = p.Bytes
	}
	if _, err := x509.ParseCertificate(b); err != nil {
		return c, fmt.Errorf("parse certificate %s: %w", certFile, err)
	}
	c.cert = b
	kb, err := os.ReadFile(keyFile)
	if err != nil {
		return c, fmt.Errorf("read private key: %w", err)
	}
	if p, _ := pem.Decode(kb); p != nil {
		kb = p.Bytes
	}
	if k, err := x509.ParsePKCS1PrivateKey(kb); err == nil {
		c.key = k
		return c, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(kb)
	if err != nil {
		return c, fmt.Errorf("parse private key %s: %w", keyFile, err)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return c, fmt.Errorf("parse private key %s: an OPC UA application key is RSA, not %T", keyFile, k)
	}
	c.key = rk
	return c, nil
}

// Thumbprint is a certificate's SHA-1 digest in hex, the form OPC UA
// tools show.
func Thumbprint(der []byte) string {
	s := sha1.Sum(der)
	return hex.EncodeToString(s[:])
}

// trusted reports whether der is one of the certificates (PEM or DER
// files) in dir.
func trusted(dir string, der []byte) (bool, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("read trust directory: %w", err)
	}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return false, fmt.Errorf("read trusted certificate: %w", err)
		}
		for rest := b; ; {
			p, r := pem.Decode(rest)
			if p == nil {
				break
			}
			if bytes.Equal(p.Bytes, der) {
				return true, nil
			}
			rest = r
		}
		if bytes.Equal(b, der) {
			return true, nil
		}
	}
	return false, nil
}

// policyURI maps the config's policy name to its URI.
func policyURI(p string) string {
	if p == config.OPCUAPolicyBasic256Sha256 {
		return ua.SecurityPolicyURIBasic256Sha256
	}
	return ua.SecurityPolicyURINone
}

// clientOptions asks the server for its endpoints, picks the one matching
// the station's security policy and mode, checks the server's
// certificate against the trust directory, and returns the options of a
// client for it. The answer of GetEndpoints is not protected, so the
// check is what makes an encrypted session trustworthy: the client then
// encrypts to the trusted certificate only, and a server without its key
// cannot open the channel.
func clientOptions(ctx context.Context, c config.OPCUAClient) ([]opcua.Option, error) {
	eps, err := opcua.GetEndpoints(ctx, c.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("get endpoints of %s: %w", c.Endpoint, err)
	}
	mode := ua.MessageSecurityModeFromString(c.SecurityMode)
	uri := policyURI(c.SecurityPolicy)
	var ep *ua.EndpointDescription
	for _, e := range eps {
		if e.SecurityPolicyURI == uri && e.SecurityMode == mode {
			ep = e
			break
		}
	}
	if ep == nil {
		var offered []string
		for _, e := range eps {
			offered = append(offered, fmt.Sprintf("%s/%s", filepath.Base(e.SecurityPolicyURI), e.SecurityMode))
		}
		return nil, fmt.Errorf("server %s offers no endpoint with security %s/%s (it offers %v)", c.Endpoint, c.SecurityPolicy, c.SecurityMode, offered)
	}
	secure := uri != ua.SecurityPolicyURINone
	if secure && !c.InsecureTrustAnyServer {
		ok, err := trusted(c.TrustDir, ep.ServerCertificate)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("%w: the certificate of %s (SHA-1 %s, %s) is not in %s; copy it there once you know it is the server's",
				ErrUntrusted, c.Endpoint, Thumbprint(ep.ServerCertificate), certSubject(ep.ServerCertificate), c.TrustDir)
		}
	}
	opts := []opcua.Option{
		opcua.ApplicationName("Pith"),
		opcua.SessionName("pith " + c.Name),
		// A publish request waits up to a keep-alive interval (at most
		// the publish interval or half the timeout, see subscribe) for its
		// answer; every other request is bounded by its context at Timeout.
		opcua.RequestTimeout(publishTimeout(c)),
		opcua.DialTimeout(c.Timeout.Std()),
	}
	if secure || c.Auth == config.OPCUAAuthCertificate {
		cr, err := loadCredentials(c.Certificate, c.PrivateKey)
		if err != nil {
			return nil, err
		}
		if uri, err := certURI(cr.cert); err == nil && uri != "" {
			opts = append(opts, opcua.ApplicationURI(uri))
		}
		opts = append(opts, opcua.Certificate(cr.cert), opcua.PrivateKey(cr.key))
		if c.Auth == config.OPCUAAuthCertificate {
			opts = append(opts, opcua.AuthCertificate(cr.cert), opcua.AuthPrivateKey(cr.key))
		}
	}
	var tokenType ua.UserTokenType
	switch c.Auth {
	case config.OPCUAAuthUsername:
		tokenType = ua.UserTokenTypeUserName
		opts = append(opts, opcua.AuthUsername(c.Username, c.Password))
	case config.OPCUAAuthCertificate:
		tokenType = ua.UserTokenTypeCertificate
	default:
		tokenType = ua.UserTokenTypeAnonymous
		opts = append(opts, opcua.AuthAnonymous())
	}
	found := false
	for _, t := range ep.UserIdentityTokens {
		found = found || t.TokenType == tokenType
	}
	if !found {
		return nil, fmt.Errorf("endpoint %s/%s of %s accepts no %s identity", c.SecurityPolicy, c.SecurityMode, c.Endpoint, c.Auth)
	}
	// SecurityFromEndpoint sets the channel's policy, mode, server
	// certificate and thumbprint, and the identity token's policy.
	opts = append(opts, opcua.SecurityFromEndpoint(ep, tokenType))
	return opts, nil
}

// certSubject returns a certificate's subject for messages.
func certSubject(der []byte) string {
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return "unparsable certificate"
	}
	return c.Subject.String()
}

// certURI returns the application URI in a certificate's subject
// alternative names: OPC UA servers check it against the client's
// ApplicationURI.
func certURI(der []byte) (string, error) {
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return "", err
	}
	for _, u := range c.URIs {
		return u.String(), nil
	}
	return "", nil
}

// ServerCertificate returns the certificate (DER) a server presents on its
// endpoint with the given security policy and mode, for an operator to
// check and put in a trust directory.
func ServerCertificate(ctx context.Context, endpoint, policy, mode string) ([]byte, error) {
	eps, err := opcua.GetEndpoints(ctx, endpoint)
	if err != nil {
		return nil, fmt.Errorf("get endpoints of %s: %w", endpoint, err)
	}
	for _, e := range eps {
		if e.SecurityPolicyURI == policyURI(policy) && e.SecurityMode == ua.MessageSecurityModeFromString(mode) {
			return e.ServerCertificate, nil
		}
	}
	return nil, fmt.Errorf("server %s offers no endpoint with security %s/%s", endpoint, policy, mode)
}

// dial connects a client for station c: endpoints, trust check, secure
// channel, session. It returns the options used, to open further secure
// channels for the same session. The client's own reconnection is off:
// in v0.8.0 its session restore closes the session it restores (its
// ActivateSession closes the client's current session, which is that
// one), losing the subscription, so the station recovers sessions itself.
func dial(ctx context.Context, c config.OPCUAClient) (*opcua.Client, []opcua.Option, error) {
	cctx, cancel := context.WithTimeout(ctx, c.Timeout.Std())
	defer cancel()
	opts, err := clientOptions(cctx, c)
	if err != nil {
		return nil, nil, err
	}
	opts = append(opts, opcua.AutoReconnect(false))
	cl, err := opcua.NewClient(c.Endpoint, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("new client: %w", err)
	}
	if err := cl.Connect(cctx); err != nil {
		return nil, nil, fmt.Errorf("connect to %s: %w", c.Endpoint, err)
	}
	return cl, opts, nil
}

// keepAliveCount is the subscription's keep-alive count: a keep-alive
// every half timeout when publishing is fast, every publish when it is
// slower than that.
func keepAliveCount(c config.OPCUAClient) uint32 {
	return max(1, uint32(c.Timeout.Std()/2/c.PublishInterval.Std()))
}

// publishTimeout bounds a publish request: the longest a server may hold
// it before a keep-alive (one publish interval more than the keep-alive
// count, servers counting from the last publish), plus the timeout.
func publishTimeout(c config.OPCUAClient) time.Duration {
	return c.Timeout.Std() + time.Duration(keepAliveCount(c)+1)*c.PublishInterval.Std()
}
