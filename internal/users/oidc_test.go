package users

import (
	"bufio"
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/audit"
	"github.com/pith-historian/pith/internal/testpeer"
)

// startProvider starts node-oidc-provider (testdata/oidc) with the client
// "pith" whose redirect URI is redirect, and returns its issuer URL.
func startProvider(t *testing.T, redirect string) string {
	t.Helper()
	if os.Getenv("PITH_TEST_OIDC") == "" {
		testpeer.Missing(t, "PITH_TEST_OIDC not set (e.g. 1, after npm ci in internal/users/testdata/oidc): test skipped")
	}
	dir, _ := filepath.Abs("testdata/oidc")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "oidc-provider")); err != nil {
		testpeer.Missing(t, "oidc-provider not installed: run npm ci in internal/users/testdata/oidc")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		testpeer.Missing(t, "node not found: install Node.js to run the OpenID Connect test")
	}
	cmd := exec.Command(node, "provider.mjs", redirect)
	cmd.Dir = dir
	out, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	port := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if p, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
				port <- p
			}
		}
	}()
	select {
	case p := <-port:
		return "http://127.0.0.1:" + p
	case <-time.After(20 * time.Second):
		t.Fatalf("provider did not start: %s", stderr.String())
	}
	return ""
}

// forger rewrites the provider's answers on their way to Pith: the JWKS
// (adding test keys) and the token endpoint's id_token (re-signed with a
// test key after edit changes its claims).
type forger struct {
	mu   sync.Mutex
	rsa  *rsa.PrivateKey
	ec   *ecdsa.PrivateKey
	pub  bool                   // publish the test keys in the JWKS
	alg  string                 // "RS256" or "ES256" re-signs; "" leaves the token alone
	kid  string                 // kid of the forged token; "" the test key's
	edit func(c map[string]any) // changes the claims before signing
}

func (f *forger) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || resp.StatusCode != 200 {
		return resp, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var doc map[string]any
	json.Unmarshal(body, &doc)
	switch {
	case strings.HasSuffix(req.URL.Path, "/jwks") && f.pub:
		keys, _ := doc["keys"].([]any)
		doc["keys"] = append(keys, testJWK("test-rsa", &f.rsa.PublicKey), testJWK("test-ec", &f.ec.PublicKey))
		body, _ = json.Marshal(doc)
	case strings.HasSuffix(req.URL.Path, "/token") && f.alg != "":
		tok, _ := doc["id_token"].(string)
		parts := strings.Split(tok, ".")
		var hdr, claims map[string]any
		decodeSegment(parts[0], &hdr)
		decodeSegment(parts[1], &claims)
		if f.edit != nil {
			f.edit(claims)
		}
		kid := f.kid
		if kid == "" {
			kid = map[string]string{"RS256": "test-rsa", "ES256": "test-ec"}[f.alg]
		} else if kid == "provider" {
			kid, _ = hdr["kid"].(string)
		}
		doc["id_token"] = signJWT(f.alg, kid, f.rsa, f.ec, claims)
		body, _ = json.Marshal(doc)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Del("Content-Length")
	return resp, nil
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func testJWK(kid string, pub crypto.PublicKey) map[string]any {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return map[string]any{"kty": "RSA", "kid": kid, "use": "sig", "n": b64(k.N.Bytes()), "e": b64([]byte{1, 0, 1})}
	case *ecdsa.PublicKey:
		x, y := make([]byte, 32), make([]byte, 32)
		k.X.FillBytes(x)
		k.Y.FillBytes(y)
		return map[string]any{"kty": "EC", "kid": kid, "crv": "P-256", "x": b64(x), "y": b64(y)}
	}
	return nil
}

func signJWT(alg, kid string, rk *rsa.PrivateKey, ek *ecdsa.PrivateKey, claims map[string]any) string {
	h, _ := json.Marshal(map[string]string{"alg": alg, "kid": kid, "typ": "JWT"})
	c, _ := json.Marshal(claims)
	signed := b64(h) + "." + b64(c)
	sum := sha256.Sum256([]byte(signed))
	var sig []byte
	if alg == "RS256" {
		sig, _ = rsa.SignPKCS1v15(rand.Reader, rk, crypto.SHA256, sum[:])
	} else {
		r, s, _ := ecdsa.Sign(rand.Reader, ek, sum[:])
		sig = make([]byte, 64)
		r.FillBytes(sig[:32])
		s.FillBytes(sig[32:])
	}
	return signed + "." + b64(sig)
}

var formAction = regexp.MustCompile(`<form[^>]*action="([^"]+)"`)

// toCallback runs a browser through the provider's login as login and
// returns Pith's callback URL with the provider's code and state, not yet
// visited.
func toCallback(t *testing.T, c *client, login string) *url.URL {
	t.Helper()
	hc := *c.hc
	var cb *url.URL
	hc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if req.URL.Path == OIDCCallback {
			cb = req.URL
			return http.ErrUseLastResponse
		}
		return nil
	}
	resp, err := hc.Get(c.r.srv.URL + OIDCStart)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := formAction.FindSubmatch(page)
	if m == nil {
		t.Fatalf("no login form from the provider (%s): %.500s", resp.Status, page)
	}
	action, err := resp.Request.URL.Parse(html.UnescapeString(string(m[1])))
	if err != nil {
		t.Fatal(err)
	}
	resp, err = hc.PostForm(action.String(), url.Values{"prompt": {"login"}, "login": {login}, "password": {"any"}})
	if err != nil {
		t.Fatal(err)
	}
	page, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if cb == nil {
		t.Fatalf("the provider did not send the browser back (%s): %.500s", resp.Status, page)
	}
	return cb
}

// visit GETs u without following redirects.
func visit(t *testing.T, c *client, u string) (*http.Response, string) {
	t.Helper()
	hc := *c.hc
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := hc.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// TestOIDCProvider signs in through a real OpenID Connect provider and
// checks that every part of the answer is verified.
func TestOIDCProvider(t *testing.T) {
	r := newRig(t, false)
	issuer := startProvider(t, r.srv.URL+OIDCCallback)
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	f := &forger{rsa: rk, ec: ek}
	use := func(secret string) {
		o := DefaultOptions()
		o.OIDC = &OIDC{Issuer: issuer, ClientID: "pith", ClientSecret: secret, Scopes: []string{"openid", "profile"},
			NameClaim: "preferred_username", GroupsClaim: "groups", Role: RoleViewer, Label: "Test IdP",
			Groups:  map[string]Role{"operators": RoleOperator, "plant-engineers": RoleEngineer},
			Timeout: 10 * time.Second, Client: &http.Client{Transport: f}}
		r.mgr.SetOptions(o)
	}
	use("pith-secret-for-tests")

	// The sign-in page learns the button's label.
	resp, body := r.client().do("GET", "/api/v1/session", "", nil)
	if !strings.Contains(body, `"oidc":"Test IdP"`) {
		t.Fatalf("session answer lacks the provider: %s %s", resp.Status, body)
	}

	signIn := func(t *testing.T, login string, mutate func(*client, *url.URL)) (*client, *http.Response, string) {
		t.Helper()
		c := r.client()
		cb := toCallback(t, c, login)
		if mutate != nil {
			mutate(c, cb)
		}
		resp, body := visit(t, c, cb.String())
		return c, resp, body
	}

	t.Run("good", func(t *testing.T) {
		c, resp, body := signIn(t, "grace", nil)
		if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/" {
			t.Fatalf("callback: %s %s", resp.Status, body)
		}
		_, body = c.do("GET", "/api/v1/session", "", nil)
		var a sessionAnswer
		json.Unmarshal([]byte(body), &a)
		if !a.SignedIn || a.User != "grace" || a.Role != string(RoleEngineer) || a.CSRF == "" {
			t.Fatalf("session after sign-in: %s", body)
		}
		c.csrf = a.CSRF
		if code := c.post("/api/v1/alarms/ack"); code != http.StatusOK {
			t.Fatalf("engineer acknowledging: %d", code)
		}
		if code := c.post("/api/v1/admin/x"); code != http.StatusForbidden {
			t.Fatalf("engineer at an admin route: %d", code)
		}
		recs, err := r.j.Query(audit.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, rec := range recs {
			if rec.Action == audit.ActionSignIn && rec.Who == "grace" && rec.Role == "engineer" && rec.Detail == "openid connect" {
				found = true
			}
		}
		if !found {
			t.Fatalf("no sign-in record for grace in %+v", recs)
		}
	})

	refused := func(t *testing.T, c *client, resp *http.Response, body, want string) {
		t.Helper()
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, want) {
			t.Fatalf("want 401 with %q, got %s %s", want, resp.Status, body)
		}
		if sessionCookie(resp) != nil && sessionCookie(resp).Value != "" {
			t.Fatal("a refused sign-in set a session cookie")
		}
		_, b := c.do("GET", "/api/v1/session", "", nil)
		if strings.Contains(b, `"signed_in":true`) {
			t.Fatalf("signed in after a refusal: %s", b)
		}
	}
	cbURL, _ := url.Parse(r.srv.URL + OIDCCallback)
	flowCookie := func(c *client) string {
		for _, k := range c.hc.Jar.Cookies(cbURL) {
			if k.Name == oidcCookie {
				return k.Value
			}
		}
		t.Fatal("no flow cookie")
		return ""
	}

	t.Run("tampered state", func(t *testing.T) {
		c, resp, body := signIn(t, "grace", func(c *client, u *url.URL) {
			q := u.Query()
			q.Set("state", q.Get("state")+"x")
			u.RawQuery = q.Encode()
		})
		refused(t, c, resp, body, "state does not match")
	})
	t.Run("another browser", func(t *testing.T) {
		c := r.client()
		cb := toCallback(t, c, "grace")
		other := r.client()
		resp, body := visit(t, other, cb.String())
		refused(t, other, resp, body, "no sign-in under way")
	})
	t.Run("wrong nonce", func(t *testing.T) {
		c, resp, body := signIn(t, "grace", func(c *client, u *url.URL) {
			fl, _ := parseFlow(flowCookie(c))
			fl.nonce = randomToken(24)
			c.hc.Jar.SetCookies(cbURL, []*http.Cookie{{Name: oidcCookie, Value: fl.cookie(), Path: OIDCCallback}})
		})
		refused(t, c, resp, body, "nonce does not match")
	})
	t.Run("wrong PKCE verifier", func(t *testing.T) {
		c, resp, body := signIn(t, "grace", func(c *client, u *url.URL) {
			fl, _ := parseFlow(flowCookie(c))
			fl.verifier = randomToken(32)
			c.hc.Jar.SetCookies(cbURL, []*http.Cookie{{Name: oidcCookie, Value: fl.cookie(), Path: OIDCCallback}})
		})
		if resp.StatusCode == http.StatusFound || !strings.Contains(body, "invalid_grant") {
			t.Fatalf("want the provider's invalid_grant, got %s %s", resp.Status, body)
		}
		_ = c
	})
	t.Run("wrong client secret", func(t *testing.T) {
		use("not-the-secret")
		defer use("pith-secret-for-tests")
		_, resp, body := signIn(t, "grace", nil)
		if resp.StatusCode == http.StatusFound || !strings.Contains(body, "invalid_client") {
			t.Fatalf("want the provider's invalid_client, got %s %s", resp.Status, body)
		}
	})
	t.Run("local accounts", func(t *testing.T) {
		// vera is a local account: the provider does not take it over,
		// and once disabled, she stays out.
		c, resp, body := signIn(t, "vera", nil)
		refused(t, c, resp, body, "local account")
		dis := true
		if _, err := r.mgr.Accounts().Update("vera", Change{Disabled: &dis}); err != nil {
			t.Fatal(err)
		}
		c, resp, body = signIn(t, "vera", nil)
		refused(t, c, resp, body, "disabled")
	})

	forged := []struct {
		name string
		alg  string
		pub  bool
		kid  string
		edit func(map[string]any)
		want string // "" accepted
	}{
		{"RS256 with a published test key", "RS256", true, "", nil, ""},
		{"ES256 with a published test key", "ES256", true, "", nil, ""},
		{"signed with a key the provider does not have", "RS256", false, "", nil, "unknown key"},
		{"signed with another key under the provider's kid", "RS256", false, "provider", nil, "signature does not verify"},
		{"expired", "RS256", true, "", func(c map[string]any) {
			c["exp"] = float64(time.Now().Add(-5 * time.Minute).Unix())
			c["iat"] = float64(time.Now().Add(-time.Hour).Unix())
		}, "expired"},
		{"issued in the future", "ES256", true, "", func(c map[string]any) { c["iat"] = float64(time.Now().Add(time.Hour).Unix()) }, "future"},
		{"wrong audience", "RS256", true, "", func(c map[string]any) { c["aud"] = "another-client" }, "audience"},
		{"extra audience without azp", "RS256", true, "", func(c map[string]any) { c["aud"] = []any{"pith", "other"}; delete(c, "azp") }, "authorized party"},
		{"wrong issuer", "RS256", true, "", func(c map[string]any) { c["iss"] = "https://evil.example" }, "issuer"},
		{"wrong nonce", "ES256", true, "", func(c map[string]any) { c["nonce"] = "n" }, "nonce"},
	}
	for _, tt := range forged {
		t.Run("forged "+tt.name, func(t *testing.T) {
			f.mu.Lock()
			f.alg, f.pub, f.kid, f.edit = tt.alg, tt.pub, tt.kid, tt.edit
			f.mu.Unlock()
			use("pith-secret-for-tests") // a fresh key cache
			defer func() { f.mu.Lock(); f.alg, f.pub = "", false; f.mu.Unlock() }()
			c, resp, body := signIn(t, "grace", nil)
			if tt.want == "" {
				if resp.StatusCode != http.StatusFound {
					t.Fatalf("a well-signed token was refused: %s %s", resp.Status, body)
				}
				return
			}
			refused(t, c, resp, body, tt.want)
		})
	}

	recs, _ := r.j.Query(audit.Filter{})
	failed := 0
	for _, rec := range recs {
		if rec.Action == audit.ActionSignInFailed && rec.Detail == "openid connect" {
			failed++
		}
	}
	if failed < 10 {
		t.Fatalf("%d failed OpenID Connect sign-ins recorded, want every refusal", failed)
	}
}

// TestOIDCVerifyAlg: a token whose header names another algorithm ("none",
// HS256 with the public key as secret) is refused before any key is used.
func TestOIDCVerifyAlg(t *testing.T) {
	o := &OIDC{Issuer: "https://idp.example", ClientID: "pith"}
	claims := b64([]byte(`{"iss":"https://idp.example","aud":"pith","exp":9999999999,"iat":1,"nonce":"n","sub":"x"}`))
	for _, alg := range []string{"none", "HS256", "RS512", "PS256", ""} {
		hdr := b64([]byte(`{"alg":"` + alg + `"}`))
		if _, err := o.verify(t.Context(), hdr+"."+claims+".", "n", time.Now()); err == nil || !strings.Contains(err.Error(), "want RS256 or ES256") {
			t.Errorf("alg %q: %v", alg, err)
		}
	}
}
