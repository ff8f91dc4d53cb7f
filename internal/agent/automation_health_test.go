package agent

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/alarm"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/plant"
	"github.com/pith-historian/pith/internal/store"
	"github.com/pith-historian/pith/internal/tag"
)

// brokenTable is a tag table on which the alarm engine cannot define its
// own tags, so that its Run fails at once.
type brokenTable struct {
	*tag.Table
}

var _ alarm.Table = brokenTable{}

func (b brokenTable) Define(d tag.Def) (tag.ID, error) {
	if d.Name == alarm.TagActive {
		return 0, errors.New("table full")
	}
	return b.Table.Define(d)
}

// TestAlarmEngineFailureReported starts the automation with an alarm
// engine that runs, then with one whose Run fails: the failure shows as
// pith.sys.alarms.running = 0 and as a 503 from /-/ready with the reason.
func TestAlarmEngineFailureReported(t *testing.T) {
	for _, tc := range []struct {
		name    string
		broken  bool
		running float64
		ready   int
	}{
		{"running", false, 1, http.StatusOK},
		{"failed", true, 0, http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(`
[alarms]
enabled = true
[[alarms.alarm]]
name = "high"
type = "hi"
tag = "tank.level"
limit = 90.0
`))
			if err != nil {
				t.Fatal(err)
			}
			cfg.Store.Dir = t.TempDir()
			db, err := store.Open(cfg.Store.Dir, store.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			p, err := plant.Start(ctx, cfg, db, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Stop()
			h := &health{}
			au := newAutomation(cfg, p, h, NewLogger("error"))
			if tc.broken {
				au.tab = brokenTable{p.Table()}
			}
			if err := au.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer au.Stop()

			waitUntil(t, "pith.sys.alarms.running written", func() bool {
				v, err := p.Table().Latest(TagAlarmsRunning)
				return err == nil && v[0].Has && v[0].V == tc.running
			})
			if tc.broken {
				waitUntil(t, "failure recorded", func() bool { return h.err() != nil })
			}
			ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "Pith is Ready.\n") })
			rec := httptest.NewRecorder()
			readyHandler(h, ok).ServeHTTP(rec, httptest.NewRequest("GET", "/-/ready", nil))
			if rec.Code != tc.ready {
				t.Fatalf("/-/ready: %d %s, want %d", rec.Code, rec.Body, tc.ready)
			}
			if tc.broken && !strings.Contains(rec.Body.String(), "alarm engine stopped: define alarm tags: table full") {
				t.Errorf("/-/ready body %q does not give the reason", rec.Body)
			}
			if d, ok := p.Meta()(TagAlarmsRunning); !ok || d.Source != "pith" {
				t.Errorf("%s meta %+v %v, want a system tag", TagAlarmsRunning, d, ok)
			}
		})
	}
}
