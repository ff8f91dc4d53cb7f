package agent

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/tag"
)

const controlTestConfig = `
[alarms]
enabled = true
[[alarms.alarm]]
name = "tank.high"
type = "hi"
tag = "tank.level"
limit = 90.0

[schedules]
enabled = true
timezone = "UTC"
[[schedules.schedule]]
name = "always"
weekly = ["daily 00:00-24:00"]

[rules]
enabled = true
scan = "20ms"
dry_run = true
[[rules.rule]]
name = "r1"
when = 'schedule("always")'
tag = "tank.valve"
value = 1.0
[[rules.limit]]
tag = "tank.level"
max = 100.0
`

// TestServeAlarmsSchedulesRules runs `pith serve` with alarms, a schedule
// and a rule, and checks their endpoints and the guarded control path.
func TestServeAlarmsSchedulesRules(t *testing.T) {
	plain, hash := api.GenerateKey()
	cfg, err := config.Parse([]byte(controlTestConfig))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store.Dir = t.TempDir()
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.HTTP.Keys = []config.APIKey{{Name: "operator", Hash: hash, Scope: "admin"}}
	cfg.Log.Level = "warn"
	// The reload reads the same file with one more rule.
	reloaded := *cfg
	next, err := config.Parse([]byte(controlTestConfig + `
[[rules.rule]]
name = "r2"
when = 'schedule("always")'
tag = "tank.drain"
value = 1.0
`))
	if err != nil {
		t.Fatal(err)
	}
	reloaded.Rules = next.Rules
	srv := startServe(t, withConfigLoader(context.Background(), func() (*config.Config, error) { return &reloaded, nil }), cfg)
	base, p := srv.URL, srv.Plant
	do := func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+plain)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		giveUp := time.Now().Add(20 * time.Second)
		for !cond() {
			if time.Now().After(giveUp) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	// The alarm's tag appears later (like an imported tag) and crosses.
	id, err := p.Table().Define(tag.Def{Name: "tank.level"})
	if err != nil {
		t.Fatal(err)
	}
	p.Table().Update([]tag.Sample{{ID: id, T: time.Now().UnixMilli(), V: 95, Q: model.QualityGood}})
	waitUntil("alarm listed", func() bool {
		_, body := do("GET", "/api/v1/alarms", "")
		return strings.Contains(body, `"id":"tank.high"`)
	})
	if code, body := do("POST", "/api/v1/alarms/ack", `{"id":"tank.high"}`); code != 200 || !strings.Contains(body, `"acked_by":"operator"`) {
		t.Fatalf("ack: %d %s", code, body)
	}
	if code, body := do("GET", "/api/v1/alarms?history=1&from=0", ""); code != 200 || !strings.Contains(body, `"event":"acknowledged"`) {
		t.Fatalf("history: %d %s", code, body)
	}
	// Every transition is an event in the events store as well.
	waitUntil("alarm transitions as events", func() bool {
		_, body := do("GET", "/api/v1/events?name=pith.alarm.acknowledged", "")
		return strings.Contains(body, `"alarm":"tank.high"`) && strings.Contains(body, `"who":"operator"`)
	})
	if _, body := do("GET", "/api/v1/events?name=pith.alarm.raised", ""); !strings.Contains(body, `"alarm":"tank.high"`) {
		t.Errorf("raised event: %s", body)
	}

	// The schedule's tag is on.
	waitUntil("schedule tag", func() bool {
		v, err := p.Table().Latest("pith.schedule.always")
		return err == nil && v[0].Has && v[0].V == 1
	})
	code, body := do("POST", "/api/v1/schedules/bookings", `{"schedule":"always","start":"2030-01-01T08:00","end":"2030-01-01T09:00"}`)
	if code != http.StatusCreated {
		t.Fatalf("booking: %d %s", code, body)
	}
	var b struct{ ID string }
	_ = json.Unmarshal([]byte(body), &b)
	if code, body := do("GET", "/api/v1/schedules", ""); code != 200 || !strings.Contains(body, b.ID) || !strings.Contains(body, `"on":true`) {
		t.Fatalf("schedules: %d %s", code, body)
	}
	if code, _ := do("DELETE", "/api/v1/schedules/bookings/"+b.ID, ""); code != 200 {
		t.Fatalf("delete booking: %d", code)
	}

	// The dry-run rule is active and "written" without a control path.
	waitUntil("rule active", func() bool {
		_, body := do("GET", "/api/v1/rules", "")
		return strings.Contains(body, `"state":"active"`) && strings.Contains(body, `"written":true`)
	})

	// API control writes obey the write limits.
	if code, body := do("POST", "/api/v1/control", `{"tag":"tank.level","value":150}`); code != http.StatusBadRequest || !strings.Contains(body, "outside the limits") {
		t.Fatalf("control over the limit: %d %s", code, body)
	}
	waitUntil("write alarm", func() bool {
		_, body := do("GET", "/api/v1/alarms", "")
		return strings.Contains(body, `"id":"write.tank.level"`)
	})

	// A reload adds the second rule.
	if code, body := do("POST", "/api/v1/admin/reload", ""); code != 200 {
		t.Fatalf("reload: %d %s", code, body)
	}
	waitUntil("reloaded rule active", func() bool {
		_, body := do("GET", "/api/v1/rules", "")
		return strings.Contains(body, `"name":"r2","state":"active"`)
	})
}
