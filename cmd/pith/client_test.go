package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/config"
)

// TestCommandsSendKey runs the commands that talk to a running Pith
// against one that has keys: each sends --key, else $PITH_KEY, as the
// API's Bearer key, and --key wins over the variable.
func TestCommandsSendKey(t *testing.T) {
	admin, adminHash := api.GenerateKey()
	reader, readerHash := api.GenerateKey()
	cfg := config.Default()
	cfg.Store.Dir = t.TempDir()
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.HTTP.Keys = []config.APIKey{{Name: "admin", Hash: adminHash, Scope: "admin"}, {Name: "reader", Hash: readerHash, Scope: "read"}}
	cfg.Log.Level = "warn"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	base := startServe(t, context.Background(), cfg).URL
	dest := filepath.Join(t.TempDir(), "backup")
	freeze := []string{"--url", base, "0.05", "0"}
	backup := []string{"--url", base, dest}
	tests := []struct {
		name    string
		env     string // $PITH_KEY
		args    []string
		run     func([]string) error
		wantErr string // "" for success
	}{
		{"freeze without a key", "", freeze, runFreeze, "401"},
		{"freeze with a read key", "", append([]string{"--key", reader}, freeze...), runFreeze, "403"},
		{"freeze with --key", "", append([]string{"--key", admin}, freeze...), runFreeze, ""},
		{"freeze with PITH_KEY", admin, freeze, runFreeze, ""},
		{"freeze: --key wins over PITH_KEY", "wrong", append([]string{"--key", admin}, freeze...), runFreeze, ""},
		{"freeze: a wrong --key is not rescued by PITH_KEY", admin, append([]string{"--key", "wrong"}, freeze...), runFreeze, "401"},
		{"backup without a key", "", backup, runBackup, "401"},
		{"backup with PITH_KEY", admin, backup, runBackup, ""},
		{"backup: --key wins over PITH_KEY", "wrong", append([]string{"--key", admin}, backup...), runBackup, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(keyEnv, tt.env)
			err := tt.run(tt.args)
			// The server ends a freeze just after it sent the summary, so
			// the next one may briefly find it still running.
			for deadline := time.Now().Add(5 * time.Second); err != nil && strings.Contains(err.Error(), "409") && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
				err = tt.run(tt.args)
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("got %v, want success", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("got %v, want an error with %q", err, tt.wantErr)
			}
		})
	}
}
