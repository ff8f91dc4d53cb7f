package promapi

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
)

// matrixOf builds a one-series matrix.
func matrixOf(ls labels.Labels, pts points) promql.Matrix {
	s := promql.Series{Metric: ls}
	for _, p := range pts {
		s.Floats = append(s.Floats, promql.FPoint{T: p.t, F: p.f})
	}
	return promql.Matrix{s}
}

func TestAppendResult(t *testing.T) {
	ls := seriesLabels("a.b", nil)
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"matrix", matrixOf(ls, points{{1000, 1.5}, {2500, math.Inf(1)}, {-1, math.NaN()}}),
			`{"resultType":"matrix","result":[{"metric":{"__name__":"a_b","tag":"a.b"},"values":[[1,"1.5"],[2.5,"+Inf"],[-0.001,"NaN"]]}]}`},
		{"vector", promql.Vector{{Metric: ls, T: 1234, F: -2}},
			`{"resultType":"vector","result":[{"metric":{"__name__":"a_b","tag":"a.b"},"value":[1.234,"-2"]}]}`},
		{"scalar", promql.Scalar{T: 1000, V: 1e21}, `{"resultType":"scalar","result":[1,"1000000000000000000000"]}`},
		{"string", promql.String{T: 1010, V: "x\"<"}, `{"resultType":"string","result":[1.01,"x\"\u003c"]}`},
	}
	for _, tt := range tests {
		var got []byte
		switch v := tt.v.(type) {
		case promql.Matrix:
			got = appendResult(nil, v)
		case promql.Vector:
			got = appendResult(nil, v)
		case promql.Scalar:
			got = appendResult(nil, v)
		case promql.String:
			got = appendResult(nil, v)
		}
		if string(got) != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
		if !json.Valid(got) {
			t.Errorf("%s: invalid JSON", tt.name)
		}
	}
}
