package events

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SignatureHeader carries a request's HMAC-SHA256 signature:
//
//	X-Pith-Signature: t=<Unix seconds>,sig=<64 hex digits>
//
// where sig is HMAC-SHA256(secret, "<t>." + body).
const SignatureHeader = "X-Pith-Signature"

// SignatureWindow is how far a signature's time may be from the server's
// clock, either way.
const SignatureWindow = 300 * time.Second

// ErrBadSignature is returned for a missing, malformed, expired or wrong
// signature.
var ErrBadSignature = errors.New("bad signature")

// Sign returns the SignatureHeader value for body at time t.
func Sign(secret, body []byte, t time.Time) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",sig=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// verifySignature checks header against body and now and returns the
// signature's hex digits (the replay key) when it is good.
func verifySignature(secret []byte, header string, body []byte, now time.Time) (string, error) {
	var ts, sig string
	for part := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "sig":
			sig = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sig == "" {
		return "", fmt.Errorf("parse %s %q: %w", SignatureHeader, header, ErrBadSignature)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > SignatureWindow || d < -SignatureWindow {
		return "", fmt.Errorf("check signature time: %v away from server time: %w", d.Round(time.Second), ErrBadSignature)
	}
	got, err := hex.DecodeString(sig)
	if err != nil || !hmac.Equal(got, mac(secret, ts, body)) {
		return "", fmt.Errorf("check signature: %w", ErrBadSignature)
	}
	return sig, nil
}
