package users

import (
	"context"
	"crypto"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// OIDC is sign-in through the plant's OpenID Connect provider: the
// authorization code flow with PKCE (S256), state and nonce. The ID token
// is verified here (RS256 or ES256 against the provider's JWKS; iss, aud,
// azp, exp, iat, nonce) with the standard library only. A person gets
// Role, or with Groups the strongest role of the groups in GroupsClaim;
// like a directory (LDAP) user, they have no local account, and a local
// account of the same name refuses the sign-in.
type OIDC struct {
	Issuer       string   // e.g. "https://login.example.org/realms/plant"
	ClientID     string   // as registered at the provider
	ClientSecret string   // "" for a public client (PKCE only)
	RedirectURL  string   // "": derived from the request (OIDCCallback on its host)
	Scopes       []string // "openid" is always asked
	NameClaim    string   // claim naming the person; "sub" when absent
	GroupsClaim  string   // claim listing groups; "" none
	Groups       map[string]Role
	Role         Role   // role of people in none of Groups
	Label        string // the sign-in page's "Sign in with <Label>"
	Timeout      time.Duration
	// Client makes the requests to the provider; nil: a client with Timeout.
	Client *http.Client

	mu    sync.Mutex
	meta  *oidcMeta
	keys  map[string]crypto.PublicKey // by kid ("" for a key without one)
	keysT time.Time                   // when keys were fetched
}

// Paths of the OpenID Connect sign-in (docs/api.md).
const (
	OIDCStart    = "/api/v1/session/oidc"
	OIDCCallback = "/api/v1/session/oidc/callback"
	oidcCookie   = "pith_oidc"
	oidcFlowAge  = 10 * time.Minute // how long a started sign-in may take
	oidcSkew     = 60 * time.Second // clock difference allowed on exp and iat
	oidcMaxBody  = 1 << 20          // bound on the provider's answers
	oidcKeyEvery = time.Minute      // unknown kid: fetch the JWKS again at most this often
)

type oidcMeta struct {
	Issuer   string `json:"issuer"`
	AuthURL  string `json:"authorization_endpoint"`
	TokenURL string `json:"token_endpoint"`
	JWKSURL  string `json:"jwks_uri"`
}

// errOIDC is a sign-in the provider's answer does not prove.
type errOIDC struct{ why string }

func (e errOIDC) Error() string { return "openid connect: " + e.why }

func oidcErr(format string, args ...any) error { return errOIDC{fmt.Sprintf(format, args...)} }

func (o *OIDC) client() *http.Client {
	if o.Client != nil {
		return o.Client
	}
	return &http.Client{Timeout: o.Timeout}
}

// getJSON fetches u into v.
func (o *OIDC) getJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	return o.do(req, v)
}

func (o *OIDC) do(req *http.Request, v any) error {
	resp, err := o.client().Do(req)
	if err != nil {
		return fmt.Errorf("openid connect: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, oidcMaxBody))
	if err != nil {
		return fmt.Errorf("openid connect: %s: %w", req.URL.Path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("openid connect: %s: %s: %.200s", req.URL.Path, resp.Status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("openid connect: %s: %w", req.URL.Path, err)
	}
	return nil
}

// discover returns the provider's metadata, fetched once.
func (o *OIDC) discover(ctx context.Context) (*oidcMeta, error) {
	o.mu.Lock()
	m := o.meta
	o.mu.Unlock()
	if m != nil {
		return m, nil
	}
	m = new(oidcMeta)
	if err := o.getJSON(ctx, strings.TrimSuffix(o.Issuer, "/")+"/.well-known/openid-configuration", m); err != nil {
		return nil, err
	}
	if m.Issuer != o.Issuer {
		return nil, oidcErr("discovery names issuer %q, configured %q", m.Issuer, o.Issuer)
	}
	if m.AuthURL == "" || m.TokenURL == "" || m.JWKSURL == "" {
		return nil, oidcErr("discovery lacks authorization_endpoint, token_endpoint or jwks_uri")
	}
	o.mu.Lock()
	o.meta = m
	o.mu.Unlock()
	return m, nil
}

// flow is what the sign-in cookie binds: state, nonce and PKCE verifier.
type flow struct{ state, nonce, verifier string }

func (f flow) cookie() string { return f.state + "." + f.nonce + "." + f.verifier }

func parseFlow(s string) (flow, bool) {
	p := strings.Split(s, ".")
	if len(p) != 3 || p[0] == "" || p[1] == "" || p[2] == "" {
		return flow{}, false
	}
	return flow{p[0], p[1], p[2]}, true
}

func pkceChallenge(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// authURL returns where to send the browser, and the flow to remember.
func (o *OIDC) authURL(ctx context.Context, redirect string) (string, flow, error) {
	m, err := o.discover(ctx)
	if err != nil {
		return "", flow{}, err
	}
	f := flow{randomToken(24), randomToken(24), randomToken(32)}
	scopes := []string{"openid"}
	for _, s := range o.Scopes {
		if !slices.Contains(scopes, s) {
			scopes = append(scopes, s)
		}
	}
	q := url.Values{"response_type": {"code"}, "client_id": {o.ClientID}, "redirect_uri": {redirect},
		"scope": {strings.Join(scopes, " ")}, "state": {f.state}, "nonce": {f.nonce},
		"code_challenge": {pkceChallenge(f.verifier)}, "code_challenge_method": {"S256"}}
	sep := "?"
	if strings.Contains(m.AuthURL, "?") {
		sep = "&"
	}
	return m.AuthURL + sep + q.Encode(), f, nil
}

// exchange trades code for the ID token and returns the verified claims.
func (o *OIDC) exchange(ctx context.Context, code, redirect string, f flow) (map[string]any, error) {
	m, err := o.discover(ctx)
	if err != nil {
		return nil, err
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect}, "code_verifier": {f.verifier}}
	if o.ClientSecret == "" {
		form.Set("client_id", o.ClientID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if o.ClientSecret != "" {
		req.SetBasicAuth(url.QueryEscape(o.ClientID), url.QueryEscape(o.ClientSecret))
	}
	var tok struct {
		IDToken string `json:"id_token"`
	}
	if err := o.do(req, &tok); err != nil {
		return nil, err
	}
	if tok.IDToken == "" {
		return nil, oidcErr("the token endpoint sent no id_token (is \"openid\" among the client's scopes?)")
	}
	return o.verify(ctx, tok.IDToken, f.nonce, time.Now())
}

// verify checks an ID token's signature and claims, and returns them.
func (o *OIDC) verify(ctx context.Context, token, nonce string, now time.Time) (map[string]any, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, oidcErr("the ID token is not a signed JWT")
	}
	var hdr struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	if err := decodeSegment(parts[0], &hdr); err != nil {
		return nil, oidcErr("ID token header: %v", err)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return nil, oidcErr("ID token signature: %v", err)
	}
	if hdr.Alg != "RS256" && hdr.Alg != "ES256" {
		return nil, oidcErr("ID token signed with %q (want RS256 or ES256)", hdr.Alg)
	}
	key, err := o.key(ctx, hdr.Kid, hdr.Alg)
	if err != nil {
		return nil, err
	}
	if !verifySig(hdr.Alg, key, parts[0]+"."+parts[1], sig) {
		return nil, oidcErr("ID token signature does not verify")
	}
	var c map[string]any
	if err := decodeSegment(parts[1], &c); err != nil {
		return nil, oidcErr("ID token claims: %v", err)
	}
	if iss, _ := c["iss"].(string); iss != o.Issuer {
		return nil, oidcErr("ID token from issuer %q, want %q", iss, o.Issuer)
	}
	var auds []string
	switch a := c["aud"].(type) {
	case string:
		auds = []string{a}
	case []any:
		for _, x := range a {
			if s, ok := x.(string); ok {
				auds = append(auds, s)
			}
		}
	}
	if !slices.Contains(auds, o.ClientID) {
		return nil, oidcErr("ID token for audience %q, not this client %q", auds, o.ClientID)
	}
	if azp, ok := c["azp"].(string); (ok || len(auds) > 1) && azp != o.ClientID {
		return nil, oidcErr("ID token authorized party %q, not this client", azp)
	}
	exp, ok1 := c["exp"].(float64)
	iat, ok2 := c["iat"].(float64)
	if !ok1 || !ok2 {
		return nil, oidcErr("ID token lacks exp or iat")
	}
	if now.Add(-oidcSkew).After(time.Unix(int64(exp), 0)) {
		return nil, oidcErr("ID token expired at %s", time.Unix(int64(exp), 0).UTC().Format(time.RFC3339))
	}
	if time.Unix(int64(iat), 0).After(now.Add(oidcSkew)) {
		return nil, oidcErr("ID token issued in the future (%s): check the clocks", time.Unix(int64(iat), 0).UTC().Format(time.RFC3339))
	}
	if n, _ := c["nonce"].(string); subtle.ConstantTimeCompare([]byte(n), []byte(nonce)) != 1 {
		return nil, oidcErr("ID token nonce does not match this sign-in")
	}
	return c, nil
}

func decodeSegment(s string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func verifySig(alg string, key crypto.PublicKey, signed string, sig []byte) bool {
	sum := sha256.Sum256([]byte(signed))
	switch k := key.(type) {
	case *rsa.PublicKey:
		return alg == "RS256" && rsa.VerifyPKCS1v15(k, crypto.SHA256, sum[:], sig) == nil
	case *ecdsa.PublicKey:
		if alg != "ES256" || len(sig) != 64 || k.Curve != elliptic.P256() {
			return false
		}
		return ecdsa.Verify(k, sum[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:]))
	}
	return false
}

// key returns the provider's key kid, fetching the JWKS when it is not
// known (a rotated key), at most once every oidcKeyEvery.
func (o *OIDC) key(ctx context.Context, kid, alg string) (crypto.PublicKey, error) {
	o.mu.Lock()
	k, ok := o.keys[kid]
	stale := o.keys == nil || time.Since(o.keysT) >= oidcKeyEvery
	o.mu.Unlock()
	if ok {
		return k, nil
	}
	if !stale {
		return nil, oidcErr("ID token signed with unknown key %q", kid)
	}
	m, err := o.discover(ctx)
	if err != nil {
		return nil, err
	}
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := o.getJSON(ctx, m.JWKSURL, &set); err != nil {
		return nil, err
	}
	keys := map[string]crypto.PublicKey{}
	for _, j := range set.Keys {
		if pk, ok := j.public(); ok && (j.Use == "" || j.Use == "sig") {
			keys[j.Kid] = pk
		}
	}
	o.mu.Lock()
	o.keys, o.keysT = keys, time.Now()
	o.mu.Unlock()
	if k, ok := keys[kid]; ok {
		return k, nil
	}
	if kid == "" {
		// No kid: the one key of the algorithm's type, if only one.
		var found crypto.PublicKey
		n := 0
		for _, pk := range keys {
			if _, isRSA := pk.(*rsa.PublicKey); isRSA == (alg == "RS256") {
				found, n = pk, n+1
			}
		}
		if n == 1 {
			return found, nil
		}
	}
	return nil, oidcErr("ID token signed with unknown key %q", kid)
}

// jwk is one JSON Web Key (RFC 7517), RSA or P-256 public.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

func (j jwk) public() (crypto.PublicKey, bool) {
	b := func(s string) *big.Int {
		v, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil || len(v) == 0 {
			return nil
		}
		return new(big.Int).SetBytes(v)
	}
	switch j.Kty {
	case "RSA":
		n, e := b(j.N), b(j.E)
		if n == nil || e == nil || n.BitLen() < 2048 || !e.IsInt64() || e.Int64() < 3 || e.Int64() > 1<<31 {
			return nil, false
		}
		return &rsa.PublicKey{N: n, E: int(e.Int64())}, true
	case "EC":
		x, y := b(j.X), b(j.Y)
		if j.Crv != "P-256" || x == nil || y == nil {
			return nil, false
		}
		raw := make([]byte, 65)
		raw[0] = 4
		x.FillBytes(raw[1:33])
		y.FillBytes(raw[33:])
		if x.BitLen() > 256 || y.BitLen() > 256 {
			return nil, false
		}
		if _, err := ecdh.P256().NewPublicKey(raw); err != nil {
			return nil, false // not a point of the curve
		}
		return &ecdsa.PublicKey{Curve: elliptic.P256(), X: x, Y: y}, true
	}
	return nil, false
}

// person returns the account name and role the claims give.
func (o *OIDC) person(c map[string]any) (string, Role, error) {
	name, _ := c[o.NameClaim].(string)
	if name == "" {
		name, _ = c["sub"].(string)
	}
	if err := CheckName(name); err != nil {
		return "", "", oidcErr("the provider names the person %q: %v", name, err)
	}
	role := o.Role
	if o.GroupsClaim != "" && len(o.Groups) > 0 {
		var groups []string
		switch g := c[o.GroupsClaim].(type) {
		case string:
			groups = []string{g}
		case []any:
			for _, x := range g {
				if s, ok := x.(string); ok {
					groups = append(groups, s)
				}
			}
		}
		best := -1
		for _, g := range groups {
			if r, ok := o.Groups[g]; ok {
				best = max(best, slices.Index(Roles, r))
			}
		}
		if best >= 0 {
			role = Roles[best]
		}
	}
	return name, role, nil
}

var errNoOIDC = errors.New("openid connect sign-in is not configured")
