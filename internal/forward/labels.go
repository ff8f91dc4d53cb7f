package forward

import (
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/pith-historian/pith/internal/model"
)

// Labels travel as JSON, the tag names as the site writes them
// (docs/format/forward.md, "Labels"):
//
//	[{"tag": "up.127_0_0_1:9100.node", "labels": {"__name__": "up", "job": "node"}}, ...]
//
// An empty labels object removes a tag's labels.

// natsOpLabels is the Pith-Op header value of a labels message.
const natsOpLabels = "labels"

// labelsJSON is one tag's labels on the wire.
type labelsJSON struct {
	Tag    string            `json:"tag"`
	Labels map[string]string `json:"labels"`
}

// encodeLabels returns the JSON of series.
func encodeLabels(series []model.Series) []byte {
	out := make([]labelsJSON, len(series))
	for i, x := range series {
		m := make(map[string]string, len(x.Labels))
		for _, l := range x.Labels {
			m[l.Name] = l.Value
		}
		out[i] = labelsJSON{Tag: x.Tag, Labels: m}
	}
	b, _ := json.Marshal(out) // maps of strings always marshal
	return b
}

// decodeLabels reads what encodeLabels wrote, checking every label set.
func decodeLabels(b []byte) ([]model.Series, error) {
	var in []labelsJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, fmt.Errorf("read labels: %w: %w", ErrBadBatch, err)
	}
	out := make([]model.Series, len(in))
	for i, x := range in {
		if x.Tag == "" || len(x.Tag) > maxTagLen {
			return nil, fmt.Errorf("read labels: %w: tag name of %d bytes", ErrBadBatch, len(x.Tag))
		}
		var ls model.Labels
		for k, v := range x.Labels {
			ls = append(ls, model.Label{Name: k, Value: v})
		}
		ls = ls.Sorted()
		if err := ls.Check(); err != nil {
			return nil, fmt.Errorf("read labels of %q: %w: %w", x.Tag, ErrBadBatch, err)
		}
		out[i] = model.Series{Tag: x.Tag, Labels: ls}
	}
	return out, nil
}

// labelsMsg is the message of forwarded labels: header Pith-Op "labels",
// the JSON as payload.
func labelsMsg(subject string, series []model.Series) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Header.Set(natsOpHeader, natsOpLabels)
	m.Data = encodeLabels(series)
	return m
}
