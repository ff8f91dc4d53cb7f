package promapi

import (
	"github.com/pith-historian/pith/internal/jsonenc"
	"net/http"
	"runtime"
	"slices"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// matchers parses the match[] selectors of the metadata endpoints.
func matchers(r *http.Request) ([][]*labels.Matcher, error) {
	var out [][]*labels.Matcher
	for _, s := range r.Form["match[]"] {
		ms, err := parser.ParseMetricSelector(s)
		if err != nil {
			return nil, fieldError("match[]", err)
		}
		out = append(out, ms)
	}
	return out, nil
}

// matchedTags returns the series matching any of sets (every tag with
// data in range when sets is empty), sorted by labels.
func (h *Handler) matchedTags(mint, maxt int64, sets [][]*labels.Matcher) []match {
	if len(sets) == 0 {
		tags, _ := matchingTags(h.st, mint, maxt, nil)
		return tags
	}
	if len(sets) == 1 {
		tags, _ := matchingTags(h.st, mint, maxt, sets[0])
		return tags
	}
	// Several selectors: their union, in series order.
	seen := make(map[string]bool)
	for _, ms := range sets {
		tags, _ := matchingTags(h.st, mint, maxt, ms)
		for _, t := range tags {
			seen[t.tag] = true
		}
	}
	all, _ := matchingTags(h.st, mint, maxt, nil)
	out := all[:0]
	for _, t := range all {
		if seen[t.tag] {
			out = append(out, t)
		}
	}
	return out
}

// validLabelName reports whether name is a classic Prometheus label name.
func validLabelName(name string) bool {
	if name == "" || name[0] >= '0' && name[0] <= '9' {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !validNameChar(c) || c == ':' {
			return false
		}
	}
	return true
}

// selection parses the start, end and match[] parameters the metadata
// endpoints share, answering 400 itself when one is bad.
func selection(w http.ResponseWriter, r *http.Request) (mint, maxt int64, sets [][]*labels.Matcher, ok bool) {
	mint, maxt, err := timeRange(r.Form.Get)
	if err == nil {
		sets, err = matchers(r)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, errBadData, err.Error())
		return 0, 0, nil, false
	}
	return mint, maxt, sets, true
}

func (h *Handler) labelNames(w http.ResponseWriter, r *http.Request) {
	mint, maxt, sets, ok := selection(w, r)
	if !ok {
		return
	}
	writeSuccess(w, appendStrings(nil, labelNames(h.matchedTags(mint, maxt, sets))))
}

func (h *Handler) labelValues(w http.ResponseWriter, r *http.Request, name string) {
	if !validLabelName(name) {
		writeError(w, http.StatusBadRequest, errBadData, "invalid label name: \""+name+"\"")
		return
	}
	mint, maxt, sets, ok := selection(w, r)
	if !ok {
		return
	}
	var vals []string
	if len(sets) <= 1 {
		var ms []*labels.Matcher
		if len(sets) == 1 {
			ms = sets[0]
		}
		vals = labelValues(h.st, mint, maxt, name, 0, ms)
	} else {
		seen := map[string]bool{}
		for _, ms := range sets {
			for _, v := range labelValues(h.st, mint, maxt, name, 0, ms) {
				if !seen[v] {
					seen[v] = true
					vals = append(vals, v)
				}
			}
		}
		slices.Sort(vals)
	}
	if vals == nil {
		vals = []string{}
	}
	writeSuccess(w, appendStrings(nil, vals))
}

func (h *Handler) series(w http.ResponseWriter, r *http.Request) {
	mint, maxt, sets, ok := selection(w, r)
	if !ok {
		return
	}
	if len(sets) == 0 {
		writeError(w, http.StatusBadRequest, errBadData, "no match[] parameter provided")
		return
	}
	b := []byte{'['}
	for i, t := range h.matchedTags(mint, maxt, sets) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendLabels(b, t.lbls)
	}
	writeSuccess(w, append(b, ']'))
}

func (h *Handler) buildinfo(w http.ResponseWriter) {
	b := []byte(`{"version":`)
	b = jsonenc.AppendString(b, promVersion)
	b = append(b, `,"revision":`...)
	b = jsonenc.AppendString(b, h.opts.Version)
	b = append(b, `,"branch":"pith","buildUser":"","buildDate":"","goVersion":`...)
	b = jsonenc.AppendString(b, runtime.Version())
	writeSuccess(w, append(b, '}'))
}
