package sparkplug

import (
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"
)

func newTestState(t *testing.T, tmpl string) (*hostState, *HostStats) {
	t.Helper()
	n, err := newNamer(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	st := &HostStats{}
	return newHostState(n, 5*time.Second, st, slog.New(slog.DiscardHandler)), st
}

// byTag returns the points of the last message by tag.
func byTag(pts []model.Point) map[string]model.Point {
	m := map[string]model.Point{}
	for _, p := range pts {
		m[p.Tag] = p
	}
	return m
}

func encode(p Payload) []byte { return Append(nil, &p) }

func dbl(name string, alias uint64, v float64) Metric {
	m := Metric{Alias: alias, HasAlias: alias != 0, Datatype: TypeDouble, Kind: KindDouble, Bits: math.Float64bits(v)}
	if name != "" {
		m.Name = []byte(name)
	}
	return m
}

func TestHostBirthDataDeath(t *testing.T) {
	h, st := newTestState(t, DefaultTagTemplate)
	now := time.UnixMilli(1700000005000)
	pts, cmds := h.handle("spBv1.0/Plant 1/NBIRTH/edge1", readPayload(t, "nbirth"), now)
	if len(cmds) != 0 {
		t.Fatalf("commands after a birth: %v", cmds)
	}
	got := byTag(pts)
	want := map[string]float64{
		"Plant_1.edge1.Inputs.Temperature": 21.5, "Plant_1.edge1.Inputs.Count": -7,
		"Plant_1.edge1.Inputs.Small": -100, "Plant_1.edge1.Inputs.Word": 65535,
		"Plant_1.edge1.Inputs.Big": -1234567890123, "Plant_1.edge1.Inputs.Counter": 9007199254740991,
		"Plant_1.edge1.Inputs.U32": 4e9, "Plant_1.edge1.Inputs.Ratio": 0.25,
		"Plant_1.edge1.Inputs.Running": 1, "Plant_1.edge1.Inputs.When": 1700000000000,
	}
	if len(got) != len(want) {
		t.Errorf("birth stored %d tags, want %d: %v", len(got), len(want), pts)
	}
	for tag, v := range want {
		if p, ok := got[tag]; !ok || p.V != v || p.Q != model.QualityGood || p.T != 1700000000000 {
			t.Errorf("%s = %+v, want %v good at the payload's time", tag, p, v)
		}
	}
	if st.SkippedBy(SkipText) != 1 || st.SkippedBy(SkipNoValue) != 1 {
		t.Errorf("skipped: text %d, novalue %d", st.SkippedBy(SkipText), st.SkippedBy(SkipNoValue))
	}
	// Data by alias, with its own timestamps.
	pts, cmds = h.handle("spBv1.0/Plant 1/NDATA/edge1", readPayload(t, "ndata_alias"), now)
	got = byTag(pts)
	if len(cmds) != 0 || len(pts) != 3 || got["Plant_1.edge1.Inputs.Temperature"].V != 22.25 ||
		got["Plant_1.edge1.Inputs.Count"].V != 42 || got["Plant_1.edge1.Inputs.Running"].V != 0 {
		t.Fatalf("ndata: %v %v", pts, cmds)
	}
	// A compressed NDATA with seq 1 again is a gap: a rebirth request.
	pts, cmds = h.handle("spBv1.0/Plant 1/NDATA/edge1", readPayload(t, "compressed_deflate"), now)
	if len(pts) != 3 || len(cmds) != 1 || cmds[0].topic != "spBv1.0/Plant 1/NCMD/edge1" || st.Gaps.Load() != 1 {
		t.Fatalf("gap: %v %v gaps %d", pts, cmds, st.Gaps.Load())
	}
	var rb Payload
	if err := Decode(cmds[0].payload, &rb); err != nil || string(rb.Metrics[0].Name) != MetricRebirth || rb.Metrics[0].Bits != 1 {
		t.Fatalf("rebirth payload %+v %v", rb, err)
	}
	// A second gap within RebirthWait asks nothing more.
	if _, cmds = h.handle("spBv1.0/Plant 1/NDATA/edge1", readPayload(t, "ndata_alias"), now.Add(time.Second)); len(cmds) != 0 {
		t.Fatalf("second rebirth within the wait: %v", cmds)
	}
	// A device.
	dbirth := encode(Payload{Timestamp: 1700000004000, HasSeq: true, Seq: 2, Metrics: []Metric{dbl("Flow", 100, 3.5)}})
	pts, _ = h.handle("spBv1.0/Plant 1/DBIRTH/edge1/pump.1", dbirth, now)
	if len(pts) != 1 || pts[0].Tag != "Plant_1.edge1.pump.1.Flow" || pts[0].V != 3.5 {
		t.Fatalf("dbirth: %v", pts)
	}
	ddata := encode(Payload{HasSeq: true, Seq: 3, Metrics: []Metric{dbl("", 100, 4)}})
	pts, _ = h.handle("spBv1.0/Plant 1/DDATA/edge1/pump.1", ddata, now)
	if len(pts) != 1 || pts[0].V != 4 || pts[0].T != now.UnixMilli() {
		t.Fatalf("ddata: %v", pts)
	}
	// A stale NDEATH (another bdSeq) changes nothing.
	stale := encode(Payload{Metrics: []Metric{{Name: []byte("bdSeq"), Datatype: TypeUInt64, Kind: KindLong, Bits: 2}}})
	if pts, _ = h.handle("spBv1.0/Plant 1/NDEATH/edge1", stale, now); len(pts) != 0 || st.Stale.Load() != 1 {
		t.Fatalf("stale death: %v", pts)
	}
	// The real NDEATH turns every metric of the node and its device bad
	// at once, keeping the last values.
	later := now.Add(time.Minute)
	pts, _ = h.handle("spBv1.0/Plant 1/NDEATH/edge1", readPayload(t, "ndeath"), later)
	got = byTag(pts)
	if len(got) != len(want)+1 {
		t.Fatalf("death marked %d tags, want %d", len(got), len(want)+1)
	}
	for tag, p := range got {
		if p.Q != model.QualityBad || p.T != later.UnixMilli() {
			t.Errorf("%s after death: %+v", tag, p)
		}
	}
	if got["Plant_1.edge1.Inputs.Temperature"].V != 22.25 || got["Plant_1.edge1.pump.1.Flow"].V != 4 {
		t.Errorf("death lost the last values: %v", got)
	}
	// Data after death: dropped, a rebirth asked.
	pts, cmds = h.handle("spBv1.0/Plant 1/NDATA/edge1", readPayload(t, "ndata_names"), later)
	if len(pts) != 0 || len(cmds) != 1 || st.Unborn.Load() != 1 {
		t.Fatalf("data after death: %v %v", pts, cmds)
	}
}

func TestHostDeviceDeathAndUnknownAlias(t *testing.T) {
	h, st := newTestState(t, "sp.{node}.{device}.{metric}")
	now := time.UnixMilli(1700000000000)
	h.handle("spBv1.0/G/NBIRTH/n", encode(Payload{HasSeq: true, Seq: 0, Metrics: []Metric{dbl("a", 1, 1)}}), now)
	h.handle("spBv1.0/G/DBIRTH/n/d", encode(Payload{HasSeq: true, Seq: 1, Metrics: []Metric{dbl("b", 2, 2)}}), now)
	pts, _ := h.handle("spBv1.0/G/DDEATH/n/d", encode(Payload{HasSeq: true, Seq: 2}), now)
	if len(pts) != 1 || pts[0].Tag != "sp.n.d.b" || pts[0].Q != model.QualityBad {
		t.Fatalf("ddeath: %v", pts)
	}
	pts, cmds := h.handle("spBv1.0/G/NDATA/n", encode(Payload{HasSeq: true, Seq: 3, Metrics: []Metric{dbl("", 9, 5), dbl("", 1, 6)}}), now)
	if len(pts) != 1 || pts[0].Tag != "sp.n.a" || len(cmds) != 1 || st.SkippedBy(SkipUnknown) != 1 {
		t.Fatalf("unknown alias: %v %v", pts, cmds)
	}
	n := h.nodes["G/n"]
	// A rebirth without metric a: a turns bad, b of the device is new.
	pts, _ = h.handle("spBv1.0/G/NBIRTH/n", encode(Payload{HasSeq: true, Seq: 0, Metrics: []Metric{dbl("c", 3, 8)}}), now)
	if got := byTag(pts); len(pts) != 2 || got["sp.n.c"].V != 8 || got["sp.n.a"].Q != model.QualityBad || got["sp.n.a"].V != 6 {
		t.Fatalf("rebirth without a metric: %v", pts)
	}
	h.handle("spBv1.0/G/NDATA/n", encode(Payload{HasSeq: true, Seq: 1, Metrics: []Metric{dbl("", 3, 9)}}), now)
	// Sequence numbers wrap at 256.
	n.seq = 255
	if _, cmds = h.handle("spBv1.0/G/NDATA/n", encode(Payload{HasSeq: true, Seq: 0}), now.Add(time.Hour)); len(cmds) != 0 {
		t.Fatalf("255 -> 0 is no gap: %v", cmds)
	}
	// Losing the broker turns the node bad.
	if pts = h.lost(now); len(pts) != 1 || pts[0].Q != model.QualityBad || pts[0].Tag != "sp.n.c" {
		t.Fatalf("lost: %v", pts)
	}
}

func TestHostBadMessages(t *testing.T) {
	h, st := newTestState(t, DefaultTagTemplate)
	now := time.Now()
	for _, topic := range []string{"spBv1.0/G/NDATA", "spBv1.0/G/BOGUS/n", "other/G/NDATA/n", "spBv1.0/G/DDATA/n"} {
		h.handle(topic, nil, now)
	}
	h.handle("spBv1.0/G/NDATA/n", []byte{0xff}, now)
	if st.Bad.Load() != 5 {
		t.Errorf("bad = %d, want 5", st.Bad.Load())
	}
	h.handle("spBv1.0/STATE/other", []byte(`{"online":true}`), now)
	h.handle("spBv1.0/G/NCMD/n", RebirthPayload(now), now)
	if st.Bad.Load() != 5 || len(h.nodes) != 0 {
		t.Errorf("STATE or NCMD handled as data")
	}
}

func TestNamer(t *testing.T) {
	for _, c := range []struct{ tmpl, group, node, dev, metric, want string }{
		{DefaultTagTemplate, "G", "N", "", "a/b c", "G.N.a.b_c"},
		{DefaultTagTemplate, "G", "N", "D", "x", "G.N.D.x"},
		{"plant.{node}.{metric}", "G", "N", "D", "x", "plant.N.x"},
	} {
		n, err := newNamer(c.tmpl)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := n.name(c.group, c.node, c.dev, c.metric); err != nil || got != c.want {
			t.Errorf("%s: %q %v, want %q", c.tmpl, got, err, c.want)
		}
	}
	for _, bad := range []string{"{group}.{node}", "{group}.{metrik}", "a{metric}"} {
		if _, err := newNamer(bad); err == nil {
			t.Errorf("template %q accepted", bad)
		}
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func timeUnix() time.Time { return time.UnixMilli(1700000000000) }

// TestHostRebirthStoresNoRepeat: a birth repeats each metric's last value
// at its time; a value this host received already, or one the archive
// holds (Stored: the box of a pair that took over has it from the other
// box), is not stored a second time.
func TestHostRebirthStoresNoRepeat(t *testing.T) {
	const topic, temp = "spBv1.0/Plant 1/NBIRTH/edge1", "Plant_1.edge1.Inputs.Temperature"
	now := time.UnixMilli(1700000005000)
	h, _ := newTestState(t, DefaultTagTemplate)
	first, _ := h.handle(topic, readPayload(t, "nbirth"), now)
	n := len(first)
	if n == 0 {
		t.Fatal("the first birth stored nothing")
	}
	if again, _ := h.handle(topic, readPayload(t, "nbirth"), now); len(again) != 0 {
		t.Errorf("a rebirth with the same values and times stored %d points again: %v", len(again), again)
	}
	h2, _ := newTestState(t, DefaultTagTemplate)
	h2.stored = func(tag string) (int64, float64, bool) {
		return 1700000000000, 21.5, tag == temp
	}
	pts, _ := h2.handle(topic, readPayload(t, "nbirth"), now)
	if _, ok := byTag(pts)[temp]; ok || len(pts) != n-1 {
		t.Errorf("a birth of a value the archive holds: %d points (want %d), %s among them: %v", len(pts), n-1, temp, ok)
	}
}
