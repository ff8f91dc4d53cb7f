package agent

// The OpenID Connect sign-in routes are open: the handlers check the
// flow cookie, the state and the ID token (docs/security.md). Added here
// rather than in the tables to keep them aligned.
func init() {
	for _, p := range []string{"/api/v1/session/oidc", "/api/v1/session/oidc/callback"} {
		roleTable[p] = struct{ get, post string }{"none", "none"}
		scopeTable[p] = struct{ get, post string }{"none", "none"}
	}
}
