package agent

import (
	"net/url"
	"testing"
)

// FuzzLocalPath: whatever a client puts in ?to=, an accepted path keeps a
// redirect on the central it is appended to, and alone in Location it
// stays on this origin.
func FuzzLocalPath(f *testing.F) {
	for _, s := range []string{"/", "/?tag=a.b", "//evil.example/", "/\\evil.example", "https://evil.example/", "x", "/a\r\nSet-Cookie: x", "/%2f%2fevil", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, to string) {
		if !localPath(to) {
			return
		}
		u, err := url.Parse("http://central1.example:8080" + to)
		if err == nil && u.Host != "central1.example:8080" {
			t.Fatalf("%q leaves the holder: host %q", to, u.Host)
		}
		if r, err := url.Parse(to); err == nil && (r.Scheme != "" || r.Host != "") {
			t.Fatalf("%q names scheme %q host %q", to, r.Scheme, r.Host)
		}
	})
}
