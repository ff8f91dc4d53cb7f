package users

import (
	"testing"
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
