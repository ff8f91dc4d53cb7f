package api

import (
	"context"
	"crypto/tls"
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"path/filepath"
	"testing"
)

// TestTLSMinimumVersion checks that both TLS configurations (automatic
// and files) refuse a TLS 1.1 client and accept TLS 1.2.
func TestTLSMinimumVersion(t *testing.T) {
	dir := t.TempDir()
	auto, err := TLSConfig(TLSOptions{Auto: true, Dir: dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	files, err := TLSConfig(TLSOptions{CertFile: filepath.Join(dir, autoCertName), KeyFile: filepath.Join(dir, autoKeyName)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]*tls.Config{"auto": auto, "files": files} {
		if cfg.MinVersion < tls.VersionTLS12 {
			t.Errorf("%s: MinVersion %#x, want TLS 1.2 or later", name, cfg.MinVersion)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- ServeWith(ctx, ln, okHandler, DefaultServerLimits(), cfg, nil) }()
		for _, v := range []struct {
			version uint16
			ok      bool
		}{{tls.VersionTLS11, false}, {tls.VersionTLS12, true}} {
			c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true, MinVersion: v.version, MaxVersion: v.version})
			if err == nil {
				c.Close()
			}
			if (err == nil) != v.ok {
				t.Errorf("%s: handshake at TLS version %#x: %v, want ok=%v", name, v.version, err, v.ok)
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s: ServeWith: %v", name, err)
		}
	}
}

// TestKeyCheckConstantTime reads Auth.check in auth.go: it must compare
// hashes with subtle.ConstantTimeCompare and go through every key with no
// early return or break in the loop, so the answer time says neither
// which key matched nor how much of one did. (Timing itself is too noisy
// to test.)
func TestKeyCheckConstantTime(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "auth.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var check *ast.FuncDecl
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == "check" && fd.Recv != nil {
			check = fd
		}
	}
	if check == nil {
		t.Fatal("no (*Auth).check in auth.go")
	}
	constantTime, loops := false, 0
	ast.Inspect(check.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if x, ok := n.X.(*ast.Ident); ok && x.Name == "subtle" && n.Sel.Name == "ConstantTimeCompare" {
				constantTime = true
			}
		case *ast.RangeStmt:
			loops++
			ast.Inspect(n.Body, func(m ast.Node) bool {
				switch m := m.(type) {
				case *ast.ReturnStmt:
					t.Error("check returns from inside its loop over the keys")
				case *ast.BranchStmt:
					if m.Tok == token.BREAK || m.Tok == token.GOTO {
						t.Error("check leaves its loop over the keys early")
					}
				}
				return true
			})
		}
		return true
	})
	if !constantTime {
		t.Error("check does not use subtle.ConstantTimeCompare")
	}
	if loops != 1 {
		t.Errorf("check has %d loops over the keys, want 1", loops)
	}
}
