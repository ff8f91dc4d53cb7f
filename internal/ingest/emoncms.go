package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/pith-historian/pith/internal/model"
)

// EmoncmsOptions tune the emoncms input API.
type EmoncmsOptions struct {
	MaxBodyBytes int64            // largest form body accepted (413 beyond)
	Gate         *TagGate         // cap on new tags; nil admits every tag
	Logger       *slog.Logger     // where refused writes are logged at debug level
	Now          func() time.Time // clock for requests without a time
}

// DefaultEmoncmsOptions returns the options Pith runs with.
func DefaultEmoncmsOptions() EmoncmsOptions {
	return EmoncmsOptions{MaxBodyBytes: 1 << 20, Logger: slog.Default(), Now: time.Now}
}

// Emoncms serves the emoncms input API (Modules/input of emoncms) so that
// emonhub, emonTx/emonPi, IoTaWatt and emonESP post to Pith unchanged.
// Mount it on /input/ (it reads the action from the path):
//
//	/input/post[.json][/NODE]  node, json|fulljson|csv|data, time
//	/input/bulk[.json]         data=[[t,node,v1,...],...], sentat|offset|time
//
// Parameters come from the query string or a form body, as emoncms's
// prop() takes them. Each value becomes the tag node.key (key is the
// input name, or its 1-based position for csv values), per the tag-name
// rule. The answers are emoncms's: "ok", or {"success": true} when fulljson
// was used, and {"success": false, "message": "..."} with status 200 for a
// request emoncms would refuse. Where Pith must refuse what emoncms would
// take (the new-tag cap: 429; a store failure: 500 or 503) the status says
// so, and emonhub keeps the data buffered and retries. Times are Unix
// seconds; fractions are kept to the millisecond (emoncms truncates them).
// The apikey parameter is left to the API's authentication layer.
type Emoncms struct {
	sink Sink
	opts EmoncmsOptions
	free chan *emState
}

// emState is the per-request memory, kept warm between requests.
type emState struct {
	body  bodyReader
	clean []byte
	pts   []model.Point
	namer namer
	key   []byte
}

// NewEmoncms returns the handler writing to sink.
func NewEmoncms(sink Sink, opts EmoncmsOptions) *Emoncms {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 1 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Emoncms{sink: sink, opts: opts, free: make(chan *emState, 4*runtime.GOMAXPROCS(0))}
}

// emError is a request emoncms itself would refuse; its text is emoncms's.
type emError string

func (e emError) Error() string { return string(e) }

// ServeHTTP serves /input/post and /input/bulk.
func (h *Emoncms) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	if i := strings.Index(path, "/input/"); i >= 0 {
		path = path[i+len("/input/"):]
	}
	action, node, _ := strings.Cut(path, "/")
	action = strings.TrimSuffix(strings.TrimSuffix(action, ".json"), ".text")
	if action != "post" && action != "bulk" {
		http.NotFound(w, r)
		return
	}
	st := h.get()
	defer h.put(st)
	p, err := h.params(st, r)
	if err != nil {
		emReply(w, writeStatus(w, err), err)
		return
	}
	now := h.opts.Now()
	var pts []model.Point
	if action == "post" {
		pts, err = st.post(p, node, now)
	} else {
		pts, err = st.bulk(p, now)
	}
	if err == nil {
		err = commit(r.Context(), h.sink, h.opts.Gate, pts, nil)
	}
	switch {
	case err == nil:
	case errors.As(err, new(emError)):
		emReply(w, http.StatusOK, err)
		return
	default:
		status := writeStatus(w, err)
		if status == http.StatusInternalServerError || status == http.StatusServiceUnavailable {
			h.opts.Logger.Warn("emoncms input not stored", "err", err)
		}
		emReply(w, status, err)
		return
	}
	if _, ok := p.get("fulljson"); ok {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"success": true}`))
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Write([]byte("ok"))
}

// emReply answers an error in emoncms's shape.
func emReply(w http.ResponseWriter, status int, err error) {
	msg := strings.ReplaceAll(err.Error(), `"`, "'") // as emoncms does
	b, _ := json.Marshal(msg)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write([]byte(`{"success": false, "message": `))
	w.Write(b)
	if status == http.StatusInsufficientStorage {
		// Every write endpoint says a full disk as {"error": ...}.
		w.Write([]byte(`, "error": `))
		w.Write(b)
	}
	w.Write([]byte("}"))
}

func (h *Emoncms) get() *emState {
	select {
	case st := <-h.free:
		return st
	default:
		return new(emState)
	}
}

func (h *Emoncms) put(st *emState) {
	clear(st.pts)
	st.pts = st.pts[:0]
	if st.retained() > poolKeepBytes {
		return // do not pin one huge body
	}
	select {
	case h.free <- st:
	default:
	}
}

// emParams are the raw query string and form body, searched in that order.
type emParams struct{ query, form string }

// get returns the unescaped value of the first name=value pair.
func (p emParams) get(name string) (string, bool) {
	if v, ok := rawParam(p.query, name); ok {
		return v, true
	}
	return rawParam(p.form, name)
}

// rawParam finds name in an urlencoded string without building a map;
// only an escaped value costs an allocation.
func rawParam(s, name string) (string, bool) {
	for s != "" {
		var kv string
		kv, s, _ = strings.Cut(s, "&")
		k, v, _ := strings.Cut(kv, "=")
		if k != name {
			continue
		}
		if strings.ContainsAny(v, "%+") {
			u, err := url.QueryUnescape(v)
			if err != nil {
				return v, true
			}
			return u, true
		}
		return v, true
	}
	return "", false
}

func (h *Emoncms) params(st *emState, r *http.Request) (emParams, error) {
	p := emParams{query: r.URL.RawQuery}
	if r.Method != http.MethodPost && r.Method != http.MethodPut {
		return p, nil
	}
	ct := r.Header.Get("Content-Type")
	if ct != "" && !strings.HasPrefix(ct, "application/x-www-form-urlencoded") {
		return p, nil
	}
	body, err := st.body.read(r, maxBody(r.Context(), h.opts.MaxBodyBytes))
	if err != nil {
		return p, err
	}
	p.form = string(body) // one copy: the values outlive the buffer in names
	return p, nil
}

// parseSeconds reads an emoncms time: Unix seconds, maybe fractional, as
// milliseconds.
func parseSeconds(s string) (int64, bool) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return 0, false
	}
	ms, err := millisFromSeconds(f)
	return ms, err == nil
}

// post parses input/post.
func (st *emState) post(p emParams, node string, now time.Time) ([]model.Point, error) {
	if node == "" {
		node, _ = p.get("node")
		if node == "" {
			node = "0" // emoncms's default node id
		}
	}
	t := now.UnixMilli()
	if s, ok := p.get("time"); ok {
		var ok bool
		if t, ok = parseSeconds(s); !ok {
			return nil, emError(fmt.Sprintf("Format error, time %q is not a number", s))
		}
	}
	var datain string
	found := false
	for _, name := range [...]string{"json", "fulljson", "csv", "data"} {
		if datain, found = p.get(name); found {
			break
		}
	}
	if datain == "" {
		return nil, emError("Request contains no data via csv, json or data tag")
	}
	if _, full := p.get("fulljson"); full {
		if _, loose := p.get("json"); !loose {
			return st.fullJSON(node, datain, t)
		}
	}
	return st.loose(node, datain, t)
}

// loose parses emoncms's forgiving forms: {a:1,b:2}, a:1,b:2 and 1,2,3.
// As in emoncms, every byte but letters, digits, '_', spaces, '-', '.',
// ':' and ',' is dropped first.
func (st *emState) loose(node, in string, t int64) ([]model.Point, error) {
	c := st.clean[:0]
	for i := 0; i < len(in); {
		b := in[i]
		if b < utf8.RuneSelf {
			if b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' ||
				b == '_' || b == '-' || b == '.' || b == ':' || b == ',' || b == ' ' || b == '\t' || b == '\n' || b == '\r' {
				c = append(c, b)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(in[i:])
		if unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsSpace(r) {
			c = append(c, in[i:i+n]...)
		}
		i += n
	}
	st.clean = c
	pts := st.pts[:0]
	csvi := 0
	for len(c) > 0 {
		var pair []byte
		if j := bytes.IndexByte(c, ','); j >= 0 {
			pair, c = c[:j], c[j+1:]
		} else {
			pair, c = c, nil
		}
		key, val, isKV := bytes.Cut(pair, []byte{':'})
		if isKV {
			if k := bytes.IndexByte(val, ':'); k >= 0 {
				val = val[:k] // PHP explode keeps the second piece only
			}
			if len(key) == 0 {
				return nil, emError("Format error, json key missing or invalid character")
			}
			v, ok := phpNumeric(val)
			if !ok {
				return nil, emError("Format error, json value is not numeric")
			}
			name, err := st.name(node, key)
			if err != nil {
				return nil, err
			}
			pts = append(pts, model.Point{Tag: name, T: t, V: v})
			continue
		}
		v, ok := phpNumeric(pair)
		if !ok {
			return nil, emError("Format error: csv value is not numeric")
		}
		csvi++
		var idx [20]byte
		name, err := st.name(node, strconv.AppendInt(idx[:0], int64(csvi), 10))
		if err != nil {
			return nil, err
		}
		pts = append(pts, model.Point{Tag: name, T: t, V: v})
	}
	st.pts = pts
	return pts, nil
}

// fullJSON parses fulljson={"key": value, ...}.
func (st *emState) fullJSON(node, in string, t int64) ([]model.Point, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(in), &m); err != nil {
		if strings.HasPrefix(strings.TrimSpace(in), "{") {
			return nil, emError("Error decoding JSON string (invalid or too deeply nested)")
		}
		return nil, emError("Input must be a JSON object")
	}
	pts := st.pts[:0]
	for k, raw := range m {
		v, ok, err := jsonNumber(raw)
		if err != nil {
			return nil, emError(fmt.Sprintf("Format error, value of %s: %v", k, err))
		}
		if !ok {
			continue // null, as emoncms stores nothing for it
		}
		name, err := st.name(node, []byte(k))
		if err != nil {
			return nil, err
		}
		pts = append(pts, model.Point{Tag: name, T: t, V: v})
	}
	st.pts = pts
	return pts, nil
}

// jsonNumber reads a JSON value as a number: numbers, numeric strings and
// booleans are taken, null is skipped (ok false), anything else refused.
func jsonNumber(raw json.RawMessage) (float64, bool, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return 0, false, nil
	case string(raw) == "true":
		return 1, true, nil
	case string(raw) == "false":
		return 0, true, nil
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, false, err
		}
		if s == "" {
			return 0, false, nil
		}
		v, ok := phpNumeric([]byte(s))
		if !ok {
			return 0, false, fmt.Errorf("%q is not numeric", s)
		}
		return v, true, nil
	case raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9':
		v, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || model.CheckValue(v) != nil {
			return 0, false, fmt.Errorf("%s is out of range", raw)
		}
		return v, true, nil
	}
	return 0, false, fmt.Errorf("%.40s is not a number", raw)
}

// phpNumeric is PHP's is_numeric then (float): optional surrounding
// whitespace, a sign, decimal digits with one optional '.', an optional
// exponent. Hex, inf and nan are not numeric.
func phpNumeric(b []byte) (float64, bool) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return 0, false
	}
	digits := false
	for i, c := range b {
		switch {
		case c >= '0' && c <= '9':
			digits = true
		case c == '.' || c == 'e' || c == 'E':
		case (c == '-' || c == '+') && (i == 0 || b[i-1] == 'e' || b[i-1] == 'E'):
		default:
			return 0, false
		}
	}
	if !digits {
		return 0, false
	}
	v, err := parseValue(b)
	if err != nil {
		return 0, false
	}
	return v, true
}

// name returns the tag node.key, cached by node and key.
func (st *emState) name(node string, key []byte) (string, error) {
	st.key = append(append(append(st.key[:0], node...), 0), key...)
	if s, ok := st.namer.lookup(st.key); ok {
		return s, nil
	}
	st.namer.Reset()
	st.namer.AddString(node)
	st.namer.Add(key)
	s, err := st.namer.remember(st.key)
	if err != nil {
		return "", emError(fmt.Sprintf("Format error, input name %q: %v", key, err))
	}
	return s, nil
}
