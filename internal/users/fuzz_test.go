package users

import (
	"crypto"
	"encoding/json"
	"testing"
	"time"
)

// FuzzDecodeAccounts: the accounts file decoder never panics, and what it
// accepts encodes back to a file it accepts again with the same accounts.
func FuzzDecodeAccounts(f *testing.F) {
	f.Add(encodeFile(&file{Accounts: []Account{{Name: "ada", Role: RoleAdmin, Hash: "$argon2id$v=19$m=8,t=1,p=1$AAAA$AAAA", Created: 1, Changed: 2}}}))
	f.Add(encodeFile(&file{}))
	f.Add([]byte("{}\n00000000\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		fl, err := decodeFile(b, "fuzz")
		if err != nil {
			return
		}
		again, err := decodeFile(encodeFile(fl), "fuzz")
		if err != nil {
			t.Fatalf("re-encoded file refused: %v", err)
		}
		if len(again.Accounts) != len(fl.Accounts) {
			t.Fatalf("%d accounts, then %d", len(fl.Accounts), len(again.Accounts))
		}
	})
}

// FuzzVerifyPassword: a hash string from disk never panics the check and
// never makes it spend unbounded memory (m is capped).
func FuzzVerifyPassword(f *testing.F) {
	f.Add("$argon2id$v=19$m=8,t=1,p=1$c2FsdHNhbHQ$aGFzaGhhc2g", "pw")
	f.Add("$argon2id$v=19$m=0,t=0,p=0$$", "")
	f.Fuzz(func(t *testing.T, hash, pw string) {
		_, _ = VerifyPassword(hash, pw)
	})
}

// BenchmarkHashPassword measures one Argon2id hash at the stored
// parameters: the work of one sign-in.
// Run: go test -run NONE -bench HashPassword ./internal/users/
func BenchmarkHashPassword(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		HashPassword(pw)
	}
}

// FuzzOIDCVerify: an ID token from the network never panics the check, and
// with no key to verify against nothing is accepted.
func FuzzOIDCVerify(f *testing.F) {
	f.Add("eyJhbGciOiJSUzI1NiIsImtpZCI6ImsifQ.eyJpc3MiOiJ4In0.AAAA")
	f.Add("eyJhbGciOiJFUzI1NiJ9..")
	f.Add("a.b.c.d")
	o := &OIDC{Issuer: "https://idp.example", ClientID: "pith", Timeout: time.Second}
	o.keys, o.keysT = map[string]crypto.PublicKey{}, time.Now() // fresh: no fetch
	f.Fuzz(func(t *testing.T, tok string) {
		if _, err := o.verify(t.Context(), tok, "n", time.Now()); err == nil {
			t.Fatalf("accepted %q with no keys", tok)
		}
	})
}

// FuzzJWK: a key from the provider's JWKS never panics the parse, and an
// accepted one is usable.
func FuzzJWK(f *testing.F) {
	f.Add([]byte(`{"kty":"EC","crv":"P-256","x":"AAAA","y":"AAAA"}`))
	f.Add([]byte(`{"kty":"RSA","n":"AQAB","e":"AQAB"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var j jwk
		if json.Unmarshal(b, &j) != nil {
			return
		}
		if pk, ok := j.public(); ok {
			verifySig("RS256", pk, "x.y", make([]byte, 256))
			verifySig("ES256", pk, "x.y", make([]byte, 64))
		}
	})
}
