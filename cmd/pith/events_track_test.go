package main

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/events"
)

// TestServeTrack runs `pith serve` in-process with an API key and an
// events secret: /api/v1/track takes a Hamustro-signed collection without
// a key, refuses a badly signed one (401) and an unsigned one without a
// key (401), and takes an unsigned one with the key.
func TestServeTrack(t *testing.T) {
	plain, hash := api.GenerateKey()
	cfg := config.Default()
	cfg.Store.Dir = t.TempDir()
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.HTTP.Keys = []config.APIKey{{Name: "test", Hash: hash, Scope: "admin"}}
	cfg.Log.Level = "warn"
	cfg.Events.Secret = "ultrasafesecret"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	base := startServe(t, context.Background(), cfg).URL
	// The JSON form of a Hamustro collection; the session is
	// md5("d1:c1:1.0:2.0").
	body := `{"device_id":"d1","client_id":"c1","session":"SESSION","system_version":"1.0","product_version":"2.0",` +
		`"env":"BETA","payloads":[{"at":1700000000,"event":"Client.Open","nr":1}]}`
	body = strings.Replace(body, "SESSION", md5hex("d1:c1:1.0:2.0"), 1)
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	do := func(hdr map[string]string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", base+"/api/v1/track", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	good := events.HamustroSign([]byte(cfg.Events.Secret), ts, []byte(body))
	tests := []struct {
		name string
		hdr  map[string]string
		code int
		want string
	}{
		{"signed", map[string]string{events.HamustroTimeHeader: ts, events.HamustroSignatureHeader: good}, 200, `"accepted":1`},
		{"bad signature", map[string]string{events.HamustroTimeHeader: ts, events.HamustroSignatureHeader: "x" + good}, 401, ""},
		{"unsigned without key", nil, 401, ""},
		{"unsigned with key", map[string]string{"Authorization": "Bearer " + plain}, 200, `"duplicates":1`},
	}
	for _, tt := range tests {
		if code, resp := do(tt.hdr); code != tt.code || !strings.Contains(resp, tt.want) {
			t.Errorf("%s: %d %s, want %d %s", tt.name, code, resp, tt.code, tt.want)
		}
	}
}

func md5hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}
