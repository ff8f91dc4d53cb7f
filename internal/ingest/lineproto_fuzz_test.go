package ingest

import (
	"errors"
	"github.com/pith-historian/pith/internal/model"
	"os"
	"path/filepath"
	"testing"
)

// FuzzLineProtocol feeds arbitrary bodies to the parser and the naming
// step: they must return points or a *LineError, never panic, and every
// name must obey the rule.
//
//	go test -run '^$' -fuzz FuzzLineProtocol ./internal/ingest/
func FuzzLineProtocol(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "lineproto", "*.lp"))
	if len(files) == 0 {
		f.Fatal("no golden files in testdata/lineproto")
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(plantBody(3, 0))
	var st lpState
	f.Fuzz(func(t *testing.T, body []byte) {
		st.lines = st.lines[:0]
		st.texts, st.tline = st.texts[:0], st.tline[:0]
		// String fields kept as text (the store keeps text): each must be
		// a valid text value with a valid name.
		pts, _, err := st.convert(body, 1, 1_000_000, 0, true)
		if err != nil {
			return
		}
		for _, p := range pts {
			if err := checkRule(p.Tag); err != nil {
				t.Fatalf("name %q: %v", p.Tag, err)
			}
		}
		for _, p := range st.texts {
			if err := checkRule(p.Tag); err != nil {
				t.Fatalf("name %q: %v", p.Tag, err)
			}
			if err := model.CheckText(p.Text); err != nil {
				t.Fatalf("text %q: %v", p.Text, err)
			}
		}
	})
}

// checkRule verifies a name against the rule's guarantees.
func checkRule(s string) error {
	if _, err := CleanName(s); err != nil {
		return err
	}
	if c, _ := CleanName(s); c != s {
		return errNotCanonical
	}
	return nil
}

var errNotCanonical = errors.New("name changes when the rule is applied again")

func TestLineProtocolGolden(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("testdata", "lineproto", "telegraf.lp"))
	if err != nil {
		t.Fatal(err)
	}
	var st lpState
	pts, skipped, err := st.convert(body, 1, 1_000_000, 42, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"cpu.cpu-total.pi3.usage_idle", "cpu.cpu-total.pi3.usage_user",
		"mem.pi3.available", "mem.pi3.used_percent",
		"modbus.boiler.1.holding_register.temperature", "modbus.boiler.1.holding_register.pump_on",
		"disk.pi3./.free",
		"weather.us_midwest.temperature",
		"my_meas.tag_val.x",
	}
	if len(pts) != len(want) || skipped != 2 {
		t.Fatalf("got %d points %v, %d skipped; want %d points, 2 skipped", len(pts), pts, skipped, len(want))
	}
	for i, p := range pts {
		if p.Tag != want[i] {
			t.Errorf("point %d: %q, want %q", i, p.Tag, want[i])
		}
	}
	if pts[8].T != -1 || pts[8].V != 1000 {
		t.Errorf("last point %+v", pts[8])
	}
}
