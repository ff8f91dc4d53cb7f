package users

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/argon2"
)

// Argon2id parameters: OWASP's recommended minimum (19 MiB, 2 passes, 1
// lane), which a Raspberry Pi 3 hashes in about a quarter of a second.
// They are stored with each hash, so raising them later keeps old hashes
// checkable.
const (
	argonTime    = 2
	argonMemory  = 19 * 1024 // KiB
	argonThreads = 1
	argonKeyLen  = 32
	saltLen      = 16
)

// Bounds of the parameters a stored hash may ask for, so that a damaged
// or hostile accounts file cannot make one check take gigabytes or minutes.
const (
	maxArgonMemory = 256 * 1024 // KiB
	maxArgonTime   = 10
)

// Password lengths accepted.
const (
	MinPassword = 10
	MaxPassword = 1024 // bounds the work one sign-in attempt costs
)

// CheckPassword refuses a password too short or too long to accept.
func CheckPassword(pw string) error {
	switch {
	case len(pw) < MinPassword:
		return fmt.Errorf("password too short: want at least %d characters", MinPassword)
	case len(pw) > MaxPassword:
		return fmt.Errorf("password too long: want at most %d bytes", MaxPassword)
	}
	return nil
}

// HashPassword returns the PHC string of pw under Argon2id with a new
// random salt: "$argon2id$v=19$m=19456,t=2,p=1$SALT$HASH" (unpadded
// base64).
func HashPassword(pw string) string {
	salt := make([]byte, saltLen)
	_, _ = rand.Read(salt) // crypto/rand.Read never fails
	sum := argon2.IDKey([]byte(pw), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads,
		b64.EncodeToString(salt), b64.EncodeToString(sum))
}

var errBadHash = errors.New("not an argon2id hash")

// VerifyPassword reports whether pw matches the PHC string hash, in
// constant time over the hash.
func VerifyPassword(hash, pw string) (bool, error) {
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return false, errBadHash
	}
	var v int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &v); err != nil || v != argon2.Version {
		return false, errBadHash
	}
	var m, t uint32
	var p uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil || m == 0 || t == 0 || p == 0 || m > maxArgonMemory || t > maxArgonTime {
		return false, errBadHash
	}
	b64 := base64.RawStdEncoding
	salt, err := b64.DecodeString(parts[4])
	if err != nil {
		return false, errBadHash
	}
	want, err := b64.DecodeString(parts[5])
	if err != nil || len(want) == 0 || len(want) > 128 {
		return false, errBadHash
	}
	got := argon2.IDKey([]byte(pw), salt, t, m, p, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}
