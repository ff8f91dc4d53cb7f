package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/config"
)

// TestInfluxQLRoute checks the /query wiring of a running Pith: InfluxQL
// answers with a read key (as Grafana's datasource sends it, the key as
// the Basic password), from the store: an imported tag without labels is
// the measurement named as the tag, field "value"; points written as line
// protocol are the measurements, fields and tags they were written as.
func TestInfluxQLRoute(t *testing.T) {
	keys := map[string]string{"read": "k-read-0123456789", "write": "k-write-0123456789"}
	var toml strings.Builder
	toml.WriteString("[http]\nlisten = \"127.0.0.1:0\"\n[log]\nlevel = \"warn\"\n")
	for scope, k := range keys {
		sum := sha256.Sum256([]byte(k))
		toml.WriteString("[[http.keys]]\nname = \"" + scope + "\"\nscope = \"" + scope + "\"\nhash = \"sha256:" + hex.EncodeToString(sum[:]) + "\"\n")
	}
	cfg, err := config.Parse([]byte(toml.String()))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store.Dir = t.TempDir()
	base := startServe(t, context.Background(), cfg).URL

	req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/import", strings.NewReader("boiler.temp,1700000000000,20.5\nboiler.temp,1700000060000,21.5\n"))
	req.Header.Set("Authorization", "Bearer "+keys["write"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("import: %d", resp.StatusCode)
	}

	query := func(q, user, pass string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+"/query?"+url.Values{"db": {"pith"}, "epoch": {"ms"}, "q": {q}}.Encode(), nil)
		if pass != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := query(`SELECT last("value") FROM "boiler.temp"`, "grafana", keys["read"])
	if want := `{"results":[{"statement_id":0,"series":[{"name":"boiler.temp","columns":["time","last"],"values":[[1700000060000,21.5]]}]}]}`; code != 200 || strings.TrimSpace(body) != want {
		t.Errorf("last: %d %s, want %s", code, body, want)
	}
	code, body = query(`SELECT mean("value") FROM "boiler.temp" WHERE time >= 1700000000000ms and time < 1700000120000ms GROUP BY time(1m)`, "grafana", keys["read"])
	if !strings.Contains(body, `[[1699999980000,20.5],[1700000040000,21.5],[1700000100000,null]]`) {
		t.Errorf("mean by minute: %d %s", code, body)
	}
	// Line protocol: the point's labels make it measurement, field and
	// tags, as InfluxDB has them.
	req, _ = http.NewRequest(http.MethodPost, base+"/write?db=x&precision=ms", strings.NewReader(
		"furnace,site=a,unit=1 temp=800.5,press=2 1700000000000\nfurnace,site=b,unit=1 temp=900 1700000030000\n"))
	req.Header.Set("Authorization", "Bearer "+keys["write"])
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("write: %d", resp.StatusCode)
	}
	for _, c := range []struct{ q, want string }{
		{`SELECT last("temp") FROM "furnace" GROUP BY "site"`, `{"results":[{"statement_id":0,"series":[{"name":"furnace","tags":{"site":"a"},"columns":["time","last"],"values":[[1700000000000,800.5]]},{"name":"furnace","tags":{"site":"b"},"columns":["time","last"],"values":[[1700000030000,900]]}]}]}`},
		{`SELECT max("temp") FROM "furnace" WHERE "unit" = '1'`, `{"results":[{"statement_id":0,"series":[{"name":"furnace","columns":["time","max"],"values":[[1700000030000,900]]}]}]}`},
		{`SHOW FIELD KEYS FROM "furnace"; SHOW TAG VALUES WITH KEY = "site"`, `{"results":[{"statement_id":0,"series":[{"name":"furnace","columns":["fieldKey","fieldType"],"values":[["press","float"],["temp","float"]]}]},{"statement_id":1,"series":[{"name":"furnace","columns":["key","value"],"values":[["site","a"],["site","b"]]}]}]}`},
	} {
		if code, body := query(c.q, "grafana", keys["read"]); code != 200 || strings.TrimSpace(body) != c.want {
			t.Errorf("%s: %d %s\nwant %s", c.q, code, body, c.want)
		}
	}
	if code, body = query(`SHOW MEASUREMENTS`, "", ""); code != http.StatusUnauthorized {
		t.Errorf("no key: %d %s", code, body)
	}
}
