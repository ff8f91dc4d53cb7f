package influxql

import (
	"context"
	"reflect"
	"testing"

	"github.com/pith-historian/pith/internal/model"
)

// TestSeriesOf checks how Pith tags become InfluxDB series.
func TestSeriesOf(t *testing.T) {
	for _, c := range []struct {
		tag  string
		ls   model.Labels
		want Series
	}{
		{"boiler.a.temp", model.LabelsFrom("_measurement", "boiler", "_field", "temp", "site", "a"),
			Series{Tag: "boiler.a.temp", Measurement: "boiler", Field: "temp", Keys: []string{"site"}, Values: []string{"a"}}},
		{"up.pi:9100.node", model.LabelsFrom("__name__", "up", "instance", "pi:9100", "job", "node"),
			Series{Tag: "up.pi:9100.node", Measurement: "up", Field: "value", Keys: []string{"instance", "job"}, Values: []string{"pi:9100", "node"}}},
		{"plc.r1", nil, Series{Tag: "plc.r1", Measurement: "plc.r1", Field: "value"}},
		{"x", model.LabelsFrom("unit", "degC"), Series{Tag: "x", Measurement: "x", Field: "value", Keys: []string{"unit"}, Values: []string{"degC"}}},
	} {
		if got := SeriesOf(c.tag, c.ls); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v, want %+v", c.tag, got, c.want)
		}
	}
}

// TestStoreCatalogFollowsTheStore checks that a new tag and new labels
// are seen by the next request, and that an unchanged store reuses the
// index.
func TestStoreCatalogFollowsTheStore(t *testing.T) {
	db := openStore(t)
	cat := NewStoreCatalog(db)
	loadLP(t, db, []string{"m,k=a f=1 1700000000000"})
	first := cat.Snapshot()
	if got := first.Measurements(); !reflect.DeepEqual(got, []string{"m"}) {
		t.Fatalf("measurements %v", got)
	}
	if cat.Snapshot() != first {
		t.Error("an unchanged store rebuilt the index")
	}
	loadLP(t, db, []string{"n f=2 1700000000000"})
	if got := cat.Snapshot().Measurements(); !reflect.DeepEqual(got, []string{"m", "n"}) {
		t.Errorf("after a new tag: %v", got)
	}
	if err := db.SetLabels(context.Background(), []model.Series{{Tag: "n.f", Labels: model.LabelsFrom("_measurement", "o", "_field", "f")}}); err != nil {
		t.Fatal(err)
	}
	if got := cat.Snapshot().Measurements(); !reflect.DeepEqual(got, []string{"m", "o"}) {
		t.Errorf("after new labels: %v", got)
	}
}
