package alarm

import (
	"testing"

	"github.com/pith-historian/pith/internal/config"
)

func TestDefsFromConfig(t *testing.T) {
	cfg, err := config.Parse([]byte(`
[alarms]
enabled = true
[[alarms.alarm]]
name = "plc.down"
type = "comm"
station = "plc"
on_delay = "5s"
[[alarms.alarm]]
name = "t.hi"
type = "hihi"
tag = "t"
limit = 3.0
`))
	if err != nil {
		t.Fatal(err)
	}
	defs, err := Defs(cfg.Alarms, []string{"plc", "meter"})
	if err != nil {
		t.Fatal(err)
	}
	if len(defs) != 3 {
		t.Fatalf("defs = %+v", defs)
	}
	if d := defs[0]; d.Kind != KindComm || d.Tag != "pith.station.plc.comm" || d.OnDelay.Seconds() != 5 {
		t.Errorf("comm def = %+v", d)
	}
	if d := defs[1]; d.Kind != KindHiHi || d.Limit != 3 {
		t.Errorf("hihi def = %+v", d)
	}
	// plc has its own comm alarm; meter gets the automatic one.
	if d := defs[2]; d.Name != "comm.meter" || d.Tag != "pith.station.meter.comm" {
		t.Errorf("automatic comm def = %+v", d)
	}
	ex, err := config.Load("../../pith.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Defs(ex.Alarms, nil); err != nil {
		t.Fatal(err)
	}
}
