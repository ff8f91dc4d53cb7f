// Package testpeer decides what a test does when a real peer it talks to
// is missing: a server (PostgreSQL, NATS, Mosquitto) whose address is not
// set, or a program (pymodbus, mbpoll, libmodbus, promtool, cyclictest,
// nats-server, Chromium) that is not installed.
//
// A newcomer's plain `go test ./...` skips such a test with a message
// saying what to install or set. CI sets PITH_REQUIRE_PEERS=1, and then
// the same test fails: no interop test can pass there by not running.
package testpeer

import (
	"fmt"
	"os"
	"testing"
)

// RequireEnv is the variable that turns a missing peer into a failure.
const RequireEnv = "PITH_REQUIRE_PEERS"

// Required reports whether missing peers fail tests (PITH_REQUIRE_PEERS=1).
func Required() bool { return os.Getenv(RequireEnv) == "1" }

// Missing ends the test for a missing peer: t.Skip with the message, or
// t.Fatal when peers are required. The message says what is missing and
// how to get it.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if Required() {
		t.Fatalf("%s (%s=1: a missing peer fails the test)", msg, RequireEnv)
	}
	t.Skip(msg)
}

// Env returns the value of the environment variable naming a peer's
// address, or ends the test through Missing when it is unset.
func Env(t testing.TB, name, example string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		Missing(t, "%s not set (e.g. %s): test skipped", name, example)
	}
	return v
}
