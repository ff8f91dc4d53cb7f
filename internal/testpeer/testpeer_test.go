package testpeer

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMissing runs this test binary again with and without
// PITH_REQUIRE_PEERS=1 and checks a missing peer skips in one and fails
// in the other.
func TestMissing(t *testing.T) {
	if os.Getenv("TESTPEER_CHILD") == "1" {
		Env(t, "TESTPEER_UNSET_ADDRESS", "127.0.0.1:1")
		t.Fatal("Env returned for an unset variable")
	}
	for _, c := range []struct {
		require string
		fail    bool
		want    string
	}{
		{"", false, "SKIP"},
		{"1", true, "a missing peer fails the test"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestMissing$", "-test.v")
		cmd.Env = append(os.Environ(), "TESTPEER_CHILD=1", RequireEnv+"="+c.require)
		out, err := cmd.CombinedOutput()
		if (err != nil) != c.fail || !strings.Contains(string(out), c.want) {
			t.Errorf("%s=%q: err %v, output:\n%s", RequireEnv, c.require, err, out)
		}
	}
}
