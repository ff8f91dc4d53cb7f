package ingest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/pith-historian/pith/internal/model"
)

// bulk parses input/bulk: data=[[t,node,v1,...],...]. Each item's time is
// a reference plus its first number; the reference is now-sentat with
// sentat, now-offset with offset, time with time, and otherwise now minus
// the last item's first number (so the last item arrived just now). Values
// are numbers (named by position 1..n, empty strings and nulls keep their
// position but store nothing) or {"name": value} objects. Items with fewer
// than three elements are skipped, as emoncms does.
func (st *emState) bulk(p emParams, now time.Time) ([]model.Point, error) {
	in, _ := p.get("data")
	var data []json.RawMessage
	if err := json.Unmarshal([]byte(in), &data); err != nil || len(data) == 0 {
		return nil, emError("Format error, json string supplied is not valid")
	}
	items := make([][]json.RawMessage, len(data))
	for i, raw := range data {
		if err := json.Unmarshal(raw, &items[i]); err != nil {
			return nil, emError(fmt.Sprintf("Format error, item %d is not an array", i+1))
		}
	}
	last := items[len(items)-1]
	if len(last) == 0 {
		return nil, emError("Format error, last item in bulk data does not contain any data")
	}
	nowMs := now.UnixMilli()
	var ref int64
	ref, err := bulkRef(p, nowMs, last[0])
	if err != nil {
		return nil, err
	}
	pts := st.pts[:0]
	for i, item := range items {
		if len(item) <= 2 {
			continue
		}
		off, ok := bulkSeconds(item[0])
		if !ok {
			return nil, emError(fmt.Sprintf("Format error, item %d: time %s is not a number", i+1, item[0]))
		}
		t, err := addMillis(ref, off)
		if err != nil {
			return nil, emError(fmt.Sprintf("Format error, item %d: %v", i+1, err))
		}
		node, err := bulkNode(item[1])
		if err != nil {
			return nil, emError(fmt.Sprintf("Format error, item %d: %v", i+1, err))
		}
		pos := 1
		for _, raw := range item[2:] {
			raw = bytes.TrimSpace(raw)
			if len(raw) > 0 && raw[0] == '{' {
				var obj map[string]json.RawMessage
				if err := json.Unmarshal(raw, &obj); err != nil {
					return nil, emError(fmt.Sprintf("Format error, item %d: bad object %.40s", i+1, raw))
				}
				for k, vr := range obj {
					v, ok, err := jsonNumber(vr)
					if err != nil {
						return nil, emError(fmt.Sprintf("Format error, item %d, input %s: %v", i+1, k, err))
					}
					if !ok {
						continue
					}
					name, err := st.name(node, []byte(k))
					if err != nil {
						return nil, err
					}
					pts = append(pts, model.Point{Tag: name, T: t, V: v})
				}
				continue // named values take no position, as in emoncms
			}
			v, ok, err := jsonNumber(raw)
			if err != nil {
				return nil, emError(fmt.Sprintf("Format error, item %d, value %d: %v", i+1, pos, err))
			}
			if ok {
				var idx [20]byte
				name, err := st.name(node, strconv.AppendInt(idx[:0], int64(pos), 10))
				if err != nil {
					return nil, err
				}
				pts = append(pts, model.Point{Tag: name, T: t, V: v})
			}
			pos++
		}
	}
	st.pts = pts
	return pts, nil
}

// bulkRef returns the time reference of a bulk request in milliseconds.
func bulkRef(p emParams, nowMs int64, lastT json.RawMessage) (int64, error) {
	for _, name := range [...]string{"sentat", "offset"} {
		if s, ok := p.get(name); ok {
			v, ok := parseSeconds(s)
			if !ok {
				return 0, emError(fmt.Sprintf("Format error, %s %q is not a number", name, s))
			}
			ref, err := addMillis(nowMs, -v)
			if err != nil {
				return 0, emError(fmt.Sprintf("Format error, %s %q: %v", name, s, err))
			}
			return ref, nil
		}
	}
	if s, ok := p.get("time"); ok {
		v, ok := parseSeconds(s)
		if !ok {
			return 0, emError(fmt.Sprintf("Format error, time %q is not a number", s))
		}
		return v, nil
	}
	off, ok := bulkSeconds(lastT)
	if !ok {
		return 0, emError("Format error, last item in bulk data does not contain any data")
	}
	ref, err := addMillis(nowMs, -off)
	if err != nil {
		return 0, emError(fmt.Sprintf("Format error, last item: %v", err))
	}
	return ref, nil
}

// bulkSeconds reads an item's time offset (a number or numeric string, in
// seconds) as milliseconds.
func bulkSeconds(raw json.RawMessage) (int64, bool) {
	v, ok, err := jsonNumber(raw)
	if err != nil || !ok {
		return 0, false
	}
	ms, err := millisFromSeconds(v)
	return ms, err == nil
}

// bulkNode reads an item's node: a number or a string.
func bulkNode(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", fmt.Errorf("missing node")
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err
		}
		return s, nil
	case '{', '[':
		return "", fmt.Errorf("node must not be an object")
	}
	if _, err := strconv.ParseFloat(string(raw), 64); err != nil {
		return "", fmt.Errorf("bad node %.40s", raw)
	}
	return string(raw), nil
}
