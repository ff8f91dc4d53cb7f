package rule

import (
	"testing"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/schedule"
	"github.com/pith-historian/pith/internal/tag"
)

// TestExampleFileCompiles builds the schedules and rules of the shipped
// sample config, so that its expressions stay valid.
func TestExampleFileCompiles(t *testing.T) {
	for _, path := range []string{"../../pith.example.toml", "../../cmd/pith/demo.toml"} {
		cfg, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		tab := tag.New(nil, tag.DefaultOptions(), nil)
		s, err := schedule.New(cfg.Schedules, t.TempDir(), tab, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(cfg.Rules.Rule) == 0 {
			t.Fatalf("%s has no rule", path)
		}
		if _, err := New(cfg.Rules, tab, s, &recorder{}, Options{}, nil); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
}
