package forward

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/model"
)

// textValues returns n text values over two tags, with quotes, commas and
// non-ASCII text, the things each encoding must carry.
func textValues(first, n int) []model.TextPoint {
	var out []model.TextPoint
	for i := first; i < first+n; i++ {
		out = append(out, model.TextPoint{
			Tag:  []string{"line.state", "line.batch"}[i%2],
			T:    1_700_000_000_000 + int64(i)*1000,
			Text: fmt.Sprintf(`B-%04d, "quoted" «ü» %s`, i, strings.Repeat("x", i%50)),
			Q:    model.Quality(i % 3),
		})
	}
	return out
}

func TestTextBatchRoundTrip(t *testing.T) {
	want := textValues(0, 300)
	b := EncodeTextBatch(42, want)
	enq, got, err := DecodeTextBatch(nil, b)
	if err != nil || enq != 42 {
		t.Fatalf("decode: %d %v", enq, err)
	}
	if !slices.Equal(got, want) {
		t.Fatal("text batch changed in the round trip")
	}
	for _, bad := range [][]byte{b[:len(b)-1], append(slices.Clone(b), 0), {2, 0, 0, 0, 0, 0, 0, 0, 0, 0}} {
		if _, _, err := DecodeTextBatch(nil, bad); err == nil {
			t.Errorf("bad batch %x decoded", bad[:min(len(bad), 12)])
		}
	}
}

// FuzzDecodeTextBatch: any payload decodes or fails, never panics, and
// what decodes encodes back to the same values.
// Run: go test -run '^$' -fuzz FuzzDecodeTextBatch -fuzztime 60s ./internal/forward/
func FuzzDecodeTextBatch(f *testing.F) {
	f.Add(EncodeTextBatch(1, textValues(0, 5)))
	f.Add(EncodeTextBatch(1, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, got, err := DecodeTextBatch(nil, b)
		if err != nil {
			return
		}
		_, again, err := DecodeTextBatch(nil, EncodeTextBatch(0, got))
		if err != nil || !slices.Equal(again, got) {
			t.Fatalf("re-encoding: %v", err)
		}
	})
}

// TestForwarderCarriesText: text committed to the store (with numbers, in
// one write) reaches the sink in the same entry, after a restart too.
func TestForwarderCarriesText(t *testing.T) {
	s := &fakeSink{}
	h := openForwarder(t, t.TempDir(), testOptions("edge"), s)
	texts := textValues(0, 20)
	if err := h.db.WriteMixed(context.Background(), points(0, 10), texts); err != nil {
		t.Fatal(err)
	}
	h.drained()
	h.close()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.points) != 10 || !slices.Equal(s.texts, texts) {
		t.Fatalf("sink got %d points and %d texts, want 10 and %d", len(s.points), len(s.texts), len(texts))
	}
}

func TestPostgresSinkText(t *testing.T) {
	url := pgURL(t)
	c := pgConnect(t, url)
	table := pgTable(t, c)
	t.Cleanup(func() { c.Exec(context.Background(), "DROP TABLE IF EXISTS "+table+"_text") })
	s := newPostgresSink(t, url, table, "edge1")
	texts := textValues(0, 100)
	b := Batch{ID: "edge1-1-0", Entries: []Entry{{ID: "edge1-1-0", Points: points(0, 5), Texts: texts}}, Points: 105}
	for range 2 { // a resend changes nothing
		if err := s.Send(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	read := func() []model.TextPoint {
		rows, err := c.Query(context.Background(), "SELECT tag, ts, value, quality FROM "+table+"_text ORDER BY ts")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []model.TextPoint
		for rows.Next() {
			var p model.TextPoint
			var ts time.Time
			var q int16
			if err := rows.Scan(&p.Tag, &ts, &p.Text, &q); err != nil {
				t.Fatal(err)
			}
			p.T, p.Q = ts.UnixMilli(), model.Quality(q)
			out = append(out, p)
		}
		return out
	}
	got := read()
	if len(got) != len(texts) {
		t.Fatalf("%d text rows, want %d", len(got), len(texts))
	}
	for i, p := range texts {
		p.Tag = "edge1." + p.Tag
		if got[i] != p {
			t.Fatalf("row %d: %+v, want %+v", i, got[i], p)
		}
	}
	var n int
	if err := c.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil || n != 5 {
		t.Fatalf("numbers table holds %d rows (%v), want 5", n, err)
	}
	// A delete reaches the text table, also from a sink that did not
	// create it (a restart).
	s2 := newPostgresSink(t, url, table, "edge1")
	d := Batch{ID: "edge1-2-0", Entries: []Entry{{ID: "edge1-2-0", Delete: &Delete{Tag: "line.state", From: 0, To: 1 << 50}}}}
	if err := s2.Send(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	if got := read(); len(got) != len(texts)/2 {
		t.Fatalf("after the delete %d text rows, want %d", len(got), len(texts)/2)
	}
}

func TestNATSText(t *testing.T) {
	url := natsURL(t)
	site := testSite(t)
	sink := newNATSSink(t, url, site)
	defer sink.Close()
	texts := textValues(0, 1200) // three messages
	b := Batch{ID: site + "-1-0", Entries: []Entry{{ID: site + "-1-0", Points: points(0, 3), Texts: texts}}, Points: 1203}
	if err := sink.Send(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	if err := sink.Send(context.Background(), b); err != nil { // deduplicated by the stream
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan []model.TextPoint, 10)
	nums := make(chan int, 10)
	h := Handlers{
		Points: func(_ string, pts []model.Point) error { nums <- len(pts); return nil },
		Text:   func(_ string, pts []model.TextPoint) error { got <- slices.Clone(pts); return nil },
	}
	go Consume(ctx, url, []string{sink.Subject()}, "text"+site, h, nil)
	var all []model.TextPoint
	for len(all) < len(texts) {
		select {
		case pts := <-got:
			all = append(all, pts...)
		case <-time.After(30 * time.Second):
			t.Fatalf("got %d of %d text values", len(all), len(texts))
		}
	}
	if !slices.Equal(all, texts) {
		t.Fatal("text values changed on the way")
	}
	select {
	case n := <-nums:
		if n != 3 {
			t.Fatalf("%d points, want 3", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no points")
	}
}

func TestMQTTSinkText(t *testing.T) {
	broker := mqttURL(t)
	prefix := fmt.Sprintf("pithtest/%d", time.Now().UnixNano())
	msgs := subscribe(t, broker, prefix+"/#")
	s := newMQTTSink(t, broker, prefix)
	texts := textValues(0, 10)
	b := Batch{ID: "e-1-0", Entries: []Entry{{ID: "e-1-0", Points: points(0, 2), Texts: texts}}, Points: 12}
	if err := s.Send(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for len(seen) < 12 {
		select {
		case m := <-msgs:
			seen[m.batch] = true
			var v struct {
				TS      int64  `json:"ts"`
				Value   any    `json:"value"`
				Quality string `json:"quality"`
			}
			if err := json.Unmarshal(m.payload, &v); err != nil {
				t.Fatalf("payload %s: %v", m.payload, err)
			}
			if str, ok := v.Value.(string); ok {
				i := int((v.TS - 1_700_000_000_000) / 1000)
				if str != texts[i].Text || v.Quality != texts[i].Q.String() || m.topic != prefix+"/"+strings.ReplaceAll(texts[i].Tag, ".", "/") {
					t.Fatalf("message %s %s, want %+v", m.topic, m.payload, texts[i])
				}
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("got %d of 12 messages", len(seen))
		}
	}
	if !seen["e-1-0/11"] {
		t.Fatalf("the text values' indexes follow the points: %v", seen)
	}
}

func TestHTTPSinkText(t *testing.T) {
	u, key, db := centralPith(t, api.ScopeWrite)
	s := newHTTPSink(t, HTTPOptions{URL: u, Key: key, Site: "edge1"})
	texts := textValues(0, 50)
	b := Batch{ID: "edge1-1-0", Entries: []Entry{{ID: "edge1-1-0", Points: points(0, 4), Texts: texts}}, Points: 54}
	if err := s.Send(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"line.state", "line.batch"} {
		got, err := db.RawText("edge1."+tag, 0, 1<<62, 0)
		if err != nil {
			t.Fatal(err)
		}
		var want []model.TextSample
		for _, p := range texts {
			if p.Tag == tag {
				want = append(want, model.TextSample{T: p.T, Text: p.Text, Q: p.Q})
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: %d values stored, want %d (%+v)", tag, len(got), len(want), got[:min(2, len(got))])
		}
	}
}
