package sparkplug

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/tag"
)

// tableCtl is a Controller that sets the tag in the table, as a device
// would once written.
type tableCtl struct {
	tab *tag.Table
	mu  sync.Mutex
	got []string
}

func (c *tableCtl) Control(_ context.Context, name string, v float64, who string) error {
	c.mu.Lock()
	c.got = append(c.got, name+" by "+who)
	c.mu.Unlock()
	id, _ := c.tab.Lookup(name)
	c.tab.Update([]tag.Sample{{ID: id, T: time.Now().UnixMilli(), V: v}})
	return nil
}

func setTag(t *testing.T, tab *tag.Table, name string, v float64) {
	t.Helper()
	id, ok := tab.Lookup(name)
	if !ok {
		var err error
		if id, err = tab.Define(tag.Def{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	tab.Update([]tag.Sample{{ID: id, T: time.Now().UnixMilli(), V: v}})
}

// metricsOf returns a message's metrics by name (or "#alias" when
// sent by alias).
func metricsOf(ev map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	ms, _ := ev["metrics"].([]any)
	for _, x := range ms {
		m := x.(map[string]any)
		if n, ok := m["name"].(string); ok && n != "" {
			out[n] = m
		} else {
			out[fmt.Sprint("#", m["alias"])] = m
		}
	}
	return out
}

// awaitMsg returns the next message on topic read by the Tahu reader.
func (p *tahu) awaitMsg(topic string, timeout time.Duration) map[string]any {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ev := p.await("msg", time.Until(deadline))
		if ev["topic"] == topic {
			return ev
		}
	}
}

// TestEdgeReadByTahu runs Pith's edge node through Mosquitto and reads it
// back with Eclipse Tahu's payload codec (npm sparkplug-payload) from a
// node script: the birth with aliases, data on change by alias, a
// commanded write of a writable tag through the control path, a refused
// one, a rebirth on request and on a new tag, and the death.
func TestEdgeReadByTahu(t *testing.T) {
	broker := brokerURL(t)
	group := uniqueID("grp")
	reader := startTahu(t, "host.js", broker, group)
	reader.await("subscribed", 10*time.Second)

	tab := tag.New(nil, tag.DefaultOptions(), nil)
	setTag(t, tab, "plant.a", 1.5)
	setTag(t, tab, "plant.b", 2)
	setTag(t, tab, "other.x", 9)
	ctl := &tableCtl{tab: tab}
	opts := DefaultEdgeOptions()
	opts.Broker, opts.Group, opts.Node, opts.Name = broker, group, "pith1", "e1"
	opts.BdSeqFile = filepath.Join(t.TempDir(), "e1.bdseq")
	if err := os.WriteFile(opts.BdSeqFile, []byte("41\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts.Tags, opts.Writable, opts.Interval = []string{"plant.*"}, []string{"plant.b"}, 20*time.Millisecond
	e, err := NewEdge(tab, ctl, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	defer func() {
		if ctx.Err() == nil {
			cancel()
			<-done
		}
	}()
	base := "spBv1.0/" + group + "/"
	birth := reader.awaitMsg(base+"NBIRTH/pith1", 10*time.Second)
	ms := metricsOf(birth)
	if birth["seq"] != 0.0 || ms["plant/a"]["value"] != 1.5 || ms["plant/b"]["value"] != 2.0 || ms["other/x"] != nil {
		t.Fatalf("birth %v", birth)
	}
	if ms["plant/a"]["type"] != "Double" || ms["bdSeq"] == nil || ms[MetricRebirth]["value"] != false {
		t.Fatalf("birth metrics %v", ms)
	}
	bdSeq := ms["bdSeq"]["value"]
	if bdSeq != 42.0 {
		t.Errorf("bdSeq %v, want 42: the one kept in the file plus one", bdSeq)
	}
	if b, _ := os.ReadFile(opts.BdSeqFile); string(b) != "42\n" {
		t.Errorf("bdSeq file holds %q", b)
	}
	aliasA, aliasB := ms["plant/a"]["alias"], ms["plant/b"]["alias"]
	if aliasA == nil || aliasB == nil || aliasA == aliasB {
		t.Fatalf("aliases %v %v", aliasA, aliasB)
	}

	// A change: NDATA by alias, seq 1.
	setTag(t, tab, "plant.a", 3)
	data := reader.awaitMsg(base+"NDATA/pith1", 5*time.Second)
	dm, _ := data["metrics"].([]any)
	if data["seq"] != 1.0 || len(dm) != 1 || dm[0].(map[string]any)["alias"] != aliasA || dm[0].(map[string]any)["value"] != 3.0 {
		t.Fatalf("ndata %v", data)
	}

	// A commanded write of a writable tag goes through the control path,
	// and its new value comes back as data.
	reader.send(map[string]any{"op": "publish", "topic": base + "NCMD/pith1", "metrics": []map[string]any{{"name": "plant/b", "type": "Double", "value": 7}}})
	data = reader.awaitMsg(base+"NDATA/pith1", 5*time.Second)
	dm, _ = data["metrics"].([]any)
	if data["seq"] != 2.0 || len(dm) != 1 || dm[0].(map[string]any)["alias"] != aliasB || dm[0].(map[string]any)["value"] != 7.0 {
		t.Fatalf("ndata after NCMD %v", data)
	}
	ctl.mu.Lock()
	if len(ctl.got) != 1 || ctl.got[0] != "plant.b by sparkplug:e1" {
		t.Errorf("control writes %v", ctl.got)
	}
	ctl.mu.Unlock()
	// A tag not marked writable is refused.
	reader.send(map[string]any{"op": "publish", "topic": base + "NCMD/pith1", "metrics": []map[string]any{{"name": "plant/a", "type": "Double", "value": 5}}})
	eventually(t, 5*time.Second, "refused write", func() bool { return e.Stats().Refused.Load() == 1 })
	if v, _ := tab.Latest("plant.a"); v[0].V != 3 {
		t.Errorf("plant.a written: %v", v)
	}

	// A rebirth request: a new NBIRTH, seq 0, same aliases.
	reader.send(map[string]any{"op": "publish", "topic": base + "NCMD/pith1", "metrics": []map[string]any{{"name": MetricRebirth, "type": "Boolean", "value": true}}})
	birth = reader.awaitMsg(base+"NBIRTH/pith1", 5*time.Second)
	ms = metricsOf(birth)
	if birth["seq"] != 0.0 || ms["plant/a"]["alias"] != aliasA || ms["plant/b"]["value"] != 7.0 {
		t.Fatalf("rebirth %v", birth)
	}
	// A new matching tag: a new birth declares it.
	setTag(t, tab, "plant.c", 4)
	birth = reader.awaitMsg(base+"NBIRTH/pith1", 5*time.Second)
	if ms = metricsOf(birth); ms["plant/c"]["value"] != 4.0 {
		t.Fatalf("birth with a new tag %v", birth)
	}

	// A clean stop publishes the death with the session's bdSeq.
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	death := reader.awaitMsg(base+"NDEATH/pith1", 5*time.Second)
	if ms = metricsOf(death); ms["bdSeq"]["value"] != bdSeq {
		t.Fatalf("death %v, want bdSeq %v", death, bdSeq)
	}
}

func TestEdgeBadBdSeqFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "x.bdseq")
	if err := os.WriteFile(f, []byte("300"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := DefaultEdgeOptions()
	o.Group, o.Node, o.Tags, o.BdSeqFile = "G", "N", []string{"*"}, f
	if _, err := NewEdge(nil, nil, o); err == nil {
		t.Fatal("a bdSeq over 255 accepted")
	}
}

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		p, s string
		want bool
	}{
		{"*", "a.b.c", true}, {"plant.*", "plant.a.b", true}, {"plant.*", "plantx", false},
		{"*.temp", "a.b.temp", true}, {"a?c", "abc", true}, {"a?c", "ac", false},
		{"a*b*c", "axxbyyc", true}, {"a*b*c", "axxbyy", false}, {"", "", true}, {"x", "", false},
	} {
		if got := glob(c.p, c.s); got != c.want {
			t.Errorf("glob(%q, %q) = %v", c.p, c.s, got)
		}
	}
}

// TestEdgeDeviceReadByTahu publishes the tags as a device's metrics and
// reads them back with Tahu's codec: NBIRTH then DBIRTH, DDATA, a DCMD
// write, and DDEATH then NDEATH on a clean stop, with one sequence across
// the node and its device.
func TestEdgeDeviceReadByTahu(t *testing.T) {
	broker := brokerURL(t)
	group := uniqueID("grp")
	reader := startTahu(t, "host.js", broker, group)
	reader.await("subscribed", 10*time.Second)
	tab := tag.New(nil, tag.DefaultOptions(), nil)
	setTag(t, tab, "plant.a", 1)
	setTag(t, tab, "plant.sp", 2)
	ctl := &tableCtl{tab: tab}
	opts := DefaultEdgeOptions()
	opts.Broker, opts.Group, opts.Node, opts.Device, opts.Name = broker, group, "pith1", "hist", "e2"
	opts.Tags, opts.Writable, opts.Interval = []string{"plant.*"}, []string{"plant.sp"}, 20*time.Millisecond
	e, err := NewEdge(tab, ctl, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	defer func() {
		if ctx.Err() == nil {
			cancel()
			<-done
		}
	}()
	base := "spBv1.0/" + group + "/"
	nb := reader.awaitMsg(base+"NBIRTH/pith1", 10*time.Second)
	if ms := metricsOf(nb); nb["seq"] != 0.0 || ms["plant/a"] != nil || ms["bdSeq"] == nil {
		t.Fatalf("nbirth %v", nb)
	}
	db := reader.awaitMsg(base+"DBIRTH/pith1/hist", 5*time.Second)
	ms := metricsOf(db)
	if db["seq"] != 1.0 || ms["plant/a"]["value"] != 1.0 || ms["plant/sp"]["value"] != 2.0 {
		t.Fatalf("dbirth %v", db)
	}
	setTag(t, tab, "plant.a", 5)
	dd := reader.awaitMsg(base+"DDATA/pith1/hist", 5*time.Second)
	if dm, _ := dd["metrics"].([]any); dd["seq"] != 2.0 || len(dm) != 1 || dm[0].(map[string]any)["value"] != 5.0 {
		t.Fatalf("ddata %v", dd)
	}
	reader.send(map[string]any{"op": "publish", "topic": base + "DCMD/pith1/hist", "metrics": []map[string]any{{"name": "plant/sp", "type": "Double", "value": 9}}})
	dd = reader.awaitMsg(base+"DDATA/pith1/hist", 5*time.Second)
	if dm, _ := dd["metrics"].([]any); dd["seq"] != 3.0 || len(dm) != 1 || dm[0].(map[string]any)["value"] != 9.0 {
		t.Fatalf("ddata after DCMD %v", dd)
	}
	// Another device's DCMD is refused.
	reader.send(map[string]any{"op": "publish", "topic": base + "DCMD/pith1/other", "metrics": []map[string]any{{"name": "plant/sp", "type": "Double", "value": 1}}})
	eventually(t, 5*time.Second, "refused DCMD", func() bool { return e.Stats().Refused.Load() == 1 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if dd := reader.awaitMsg(base+"DDEATH/pith1/hist", 5*time.Second); dd["seq"] != 4.0 {
		t.Errorf("ddeath %v", dd)
	}
	reader.awaitMsg(base+"NDEATH/pith1", 5*time.Second)
}

// TestEdgePrimaryHost gates the edge node's births on the STATE of its
// primary host (Pith's own host here), read by Tahu's codec: no birth
// before the host is online, an NDEATH when it says offline, a new birth
// with the next bdSeq when it is back.
func TestEdgePrimaryHost(t *testing.T) {
	broker := brokerURL(t)
	group, hostID := uniqueID("grp"), uniqueID("primary")
	defer clearRetained(t, broker, "spBv1.0/STATE/"+hostID)
	reader := startTahu(t, "host.js", broker, group)
	reader.await("subscribed", 10*time.Second)
	tab := tag.New(nil, tag.DefaultOptions(), nil)
	setTag(t, tab, "plant.a", 1)
	opts := DefaultEdgeOptions()
	opts.Broker, opts.Group, opts.Node, opts.Name, opts.PrimaryHost = broker, group, "pith1", "e3", hostID
	opts.Tags, opts.Interval = []string{"plant.*"}, 20*time.Millisecond
	e, err := NewEdge(tab, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	defer func() { cancel(); <-done }()
	eventually(t, 5*time.Second, "edge connected", func() bool { return e.Stats().Connects.Load() > 0 })
	time.Sleep(300 * time.Millisecond)
	if e.Stats().Births.Load() != 0 {
		t.Fatal("born before the primary host was online")
	}

	startHost := func() func() {
		hopts := DefaultHostOptions()
		hopts.Broker, hopts.Groups, hopts.HostID = broker, []string{group}, hostID
		h, err := NewHost(&memSink{}, hopts)
		if err != nil {
			t.Fatal(err)
		}
		hctx, hcancel := context.WithCancel(context.Background())
		hdone := make(chan error, 1)
		go func() { hdone <- h.Run(hctx) }()
		return func() { hcancel(); <-hdone }
	}
	stop := startHost()
	birth := reader.awaitMsg("spBv1.0/"+group+"/NBIRTH/pith1", 10*time.Second)
	bd := metricsOf(birth)["bdSeq"]["value"].(float64)
	setTag(t, tab, "plant.a", 2)
	reader.awaitMsg("spBv1.0/"+group+"/NDATA/pith1", 5*time.Second)

	stop() // STATE offline: the edge node dies
	death := reader.awaitMsg("spBv1.0/"+group+"/NDEATH/pith1", 10*time.Second)
	if metricsOf(death)["bdSeq"]["value"] != bd {
		t.Errorf("death %v, want bdSeq %v", death, bd)
	}
	stop = startHost()
	defer stop()
	birth = reader.awaitMsg("spBv1.0/"+group+"/NBIRTH/pith1", 10*time.Second)
	if got := metricsOf(birth)["bdSeq"]["value"]; got != bd+1 {
		t.Errorf("rebirth bdSeq %v, want %v", got, bd+1)
	}
	// The broker may deliver the NBIRTH before the edge counts it.
	eventually(t, 5*time.Second, "two births counted", func() bool { return e.Stats().Births.Load() == 2 })
}
