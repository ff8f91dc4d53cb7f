package forward

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"
)

func TestLabelsJSON(t *testing.T) {
	series := []model.Series{
		{Tag: "up.127_0_0_1:9100.node", Labels: model.LabelsFrom("__name__", "up", "instance", "127.0.0.1:9100", "job", "node")},
		{Tag: "plain"},
	}
	got, err := decodeLabels(encodeLabels(series))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Tag != series[0].Tag || !got[0].Labels.Equal(series[0].Labels) || got[1].Labels != nil {
		t.Fatalf("round trip: %+v", got)
	}
	for _, bad := range []string{`{}`, `[{"tag":""}]`, `[{"tag":"x","labels":{"":"v"}}]`} {
		if _, err := decodeLabels([]byte(bad)); !errors.Is(err, ErrBadBatch) {
			t.Errorf("decodeLabels(%s) = %v, want ErrBadBatch", bad, err)
		}
	}
}

// FuzzLabelsJSON decodes labels messages: an error or checked labels.
//
//	go test -run '^$' -fuzz FuzzLabelsJSON ./internal/forward/
func FuzzLabelsJSON(f *testing.F) {
	f.Add(encodeLabels([]model.Series{{Tag: "a.b", Labels: model.LabelsFrom("k", "v")}}))
	f.Add([]byte(`[{"tag":"x","labels":{"a":"1","a":"2"}}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		series, err := decodeLabels(b)
		if err != nil {
			return
		}
		for _, x := range series {
			if err := x.Labels.Check(); err != nil || x.Tag == "" {
				t.Fatalf("decoded %+v: %v", x, err)
			}
		}
	})
}

// TestPostgresSinkLabels checks that labels entries land in the labels
// table beside the samples, upserted, in the batch's transaction.
func TestPostgresSinkLabels(t *testing.T) {
	url := pgURL(t)
	c := pgConnect(t, url)
	table := pgTable(t, c)
	t.Cleanup(func() { c.Exec(context.Background(), "DROP TABLE IF EXISTS "+table+"_labels") })
	s := newPostgresSink(t, url, table, "edge1")
	ls := model.LabelsFrom("__name__", "up", "job", "pith")
	b := Batch{ID: "edge1-1-0", Entries: []Entry{
		{ID: "edge1-1-0", Labels: []model.Series{{Tag: "up.pith", Labels: ls}}},
		{ID: "edge1-1-50", Points: []model.Point{{Tag: "up.pith", T: 1_700_000_000_000, V: 1}}},
	}, Points: 1}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 2 { // a resend changes nothing
		if err := s.Send(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	var job, name string
	if err := c.QueryRow(ctx, "SELECT labels->>'job', labels->>'__name__' FROM "+table+"_labels WHERE tag = 'edge1.up.pith'").Scan(&job, &name); err != nil {
		t.Fatal(err)
	}
	if job != "pith" || name != "up" {
		t.Errorf("labels row: job %q, __name__ %q", job, name)
	}
	checkRows(t, pgRows(t, c, table), []model.Point{{Tag: "edge1.up.pith", T: 1_700_000_000_000, V: 1}})
}
