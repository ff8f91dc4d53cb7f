package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/pith-historian/pith/internal/jsonenc"
	"github.com/pith-historian/pith/internal/store/wal"
)

// Limits of GET /api/v1/events.
const (
	defaultListLimit = 100
	maxListLimit     = 10000
)

// Handler serves POST and GET /api/v1/events and POST /api/v1/track
// (Hamustro). A POST carrying SignatureHeader (or, on /api/v1/track,
// HamustroSignatureHeader or HamustroTimeHeader) is authenticated here
// (401 when the signature is bad);
// any other request is left to the caller's middleware (POST needs the
// write scope), unless Options.RequireSignature refuses unsigned POSTs.
func (c *Collector) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/events", c.servePost)
	mux.HandleFunc("POST /api/v1/track", c.serveTrack)
	mux.HandleFunc("GET /api/v1/events", c.serveList)
	return mux
}

// PostHandler serves POST /api/v1/events alone, as Handler does; a
// caller that routes by itself (Pith's light HTTP server) saves Handler's
// routing.
func (c *Collector) PostHandler() http.Handler { return http.HandlerFunc(c.servePost) }

// TrackHandler serves POST /api/v1/track alone, as Handler does.
func (c *Collector) TrackHandler() http.Handler { return http.HandlerFunc(c.serveTrack) }

// servePost decodes, validates and accepts the events of one request,
// answering 200 {"accepted": N, "duplicates": D} once they are durable.
func (c *Collector) servePost(w http.ResponseWriter, r *http.Request) {
	verify := func(raw []byte, now time.Time) (string, error) {
		h := r.Header.Get(SignatureHeader)
		if h == "" && !c.opts.RequireSignature {
			return "", nil
		}
		if len(c.opts.Secret) == 0 {
			return "", errors.New("signatures are not configured")
		}
		sig, err := verifySignature(c.opts.Secret, h, raw, now)
		// Control bytes cannot occur in an event id, so this key never
		// meets one in the dedup map.
		return "\x00sig:" + sig, err
	}
	decode := func(raw []byte, now int64, b *batch) error {
		var names map[string]string
		if p := c.names.Load(); p != nil {
			names = *p
		}
		return b.decode(raw, now, c.opts.MaxEventsPerRequest, names)
	}
	c.ingest(w, r, verify, decode)
}

// errMediaType is a track request's unsupported Content-Type (415).
var errMediaType = errors.New("Content-Type must be application/protobuf or application/json")

// serveTrack takes Hamustro's Collection (protobuf or JSON) at
// /api/v1/track, signed with X-Hamustro-Signature or (passed by the
// caller's middleware) with an API key.
func (c *Collector) serveTrack(w http.ResponseWriter, r *http.Request) {
	verify := func(raw []byte, now time.Time) (string, error) {
		ts, sig := r.Header.Get(HamustroTimeHeader), r.Header.Get(HamustroSignatureHeader)
		if ts == "" && sig == "" && !c.opts.RequireSignature {
			return "", nil
		}
		if len(c.opts.Secret) == 0 {
			return "", errors.New("signatures are not configured")
		}
		sig, err := verifyHamustro(c.opts.Secret, ts, sig, raw, now)
		return "\x00ham:" + sig, err
	}
	decode := func(raw []byte, _ int64, b *batch) error {
		var coll *hamCollection
		var err error
		mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		switch mt {
		case "application/protobuf", "application/x-protobuf", "application/octet-stream":
			coll, err = decodeHamustroProto(raw)
		case "application/json":
			coll, err = decodeHamustroJSON(raw)
		default:
			return errMediaType
		}
		if err != nil {
			return &ValidationError{Msg: "decode collection: " + err.Error()}
		}
		evs, err := coll.events(nil, c.opts.MaxEventsPerRequest)
		if err != nil {
			return err
		}
		b.addEvents(evs)
		return nil
	}
	c.ingest(w, r, verify, decode)
}

// ingest reads a request's body within the memory bounds, checks its
// signature with verify (which returns the replay key of a signed
// request, or "" for an unsigned one), decodes it with decode into the
// empty batch b and accepts the events, answering 200 {"accepted": N,
// "duplicates": D} once they are durable (204 when the body holds no
// events).
func (c *Collector) ingest(w http.ResponseWriter, r *http.Request,
	verify func(raw []byte, now time.Time) (string, error),
	decode func(raw []byte, nowMS int64, b *batch) error) {
	// Reserve memory for the body before reading it, so that many slow
	// clients cannot make the collector hold more than MaxInflightBytes.
	reserve := c.opts.MaxRequestBytes
	if r.ContentLength >= 0 && r.ContentLength < reserve {
		reserve = r.ContentLength
	}
	if r.ContentLength > c.opts.MaxRequestBytes {
		c.stats.rejected.Add(1)
		writeError(w, http.StatusRequestEntityTooLarge, "body larger than "+strconv.FormatInt(c.opts.MaxRequestBytes, 10)+" bytes", -1)
		return
	}
	// A lone request is always let in, even when MaxRequestBytes is
	// larger than MaxInflightBytes.
	if n := c.inflight.Add(reserve); n > c.opts.MaxInflightBytes && n != reserve {
		c.inflight.Add(-reserve)
		c.overloaded(w)
		return
	}
	defer c.inflight.Add(-reserve)
	b := c.getBatch()
	defer c.putBatch(b)
	// The body is read whole: the fast decoder and the signature both
	// need it in one piece, and its size is already reserved.
	var raw []byte
	var err error
	if r.ContentLength >= 0 {
		// The length is known (and within reserve): one buffer, reused
		// from request to request. net/http ends the body after
		// ContentLength bytes.
		raw = b.body(int(r.ContentLength))
		_, err = io.ReadFull(r.Body, raw)
	} else {
		raw, err = io.ReadAll(http.MaxBytesReader(w, r.Body, reserve))
	}
	if err != nil {
		c.stats.rejected.Add(1)
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, "body larger than "+strconv.FormatInt(mbe.Limit, 10)+" bytes", -1)
		} else {
			writeError(w, http.StatusBadRequest, "read body: "+err.Error(), -1)
		}
		return
	}
	nowT := c.opts.Now()
	now := nowT.UnixMilli()
	sigKey, err := verify(raw, nowT)
	if err != nil {
		c.stats.rejected.Add(1)
		writeError(w, http.StatusUnauthorized, err.Error(), -1)
		return
	}
	if err := decode(raw, now, b); err != nil {
		c.stats.rejected.Add(1)
		var ve *ValidationError
		switch {
		case errors.As(err, &ve):
			writeError(w, http.StatusBadRequest, ve.Error(), ve.Index)
		case errors.Is(err, errMediaType):
			writeError(w, http.StatusUnsupportedMediaType, err.Error(), -1)
		default:
			writeError(w, http.StatusBadRequest, err.Error(), -1)
		}
		return
	}
	if len(b.evs) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	accepted, dups, err := c.accept(r.Context(), b, now, sigKey)
	switch {
	case errors.Is(err, ErrOverloaded), errors.Is(err, ErrClosed):
		c.overloaded(w)
		return
	case wal.IsNoSpace(err):
		// The WAL cut the lost records off; events are taken again as
		// soon as space returns.
		writeError(w, http.StatusInsufficientStorage, "disk full: "+err.Error(), -1)
		return
	case err != nil:
		c.log.Error("accept events", "err", err)
		writeError(w, http.StatusInternalServerError, err.Error(), -1)
		return
	}
	resp := append(b.raw[:0], `{"accepted":`...)
	resp = strconv.AppendInt(resp, int64(accepted), 10)
	resp = append(resp, `,"duplicates":`...)
	resp = strconv.AppendInt(resp, int64(dups), 10)
	resp = append(resp, "}\n"...)
	w.Header()["Content-Type"] = jsonContentType
	w.Write(resp)
}

// jsonContentType is the Content-Type header of the answers, shared (no
// writer changes a header value it was given).
var jsonContentType = []string{"application/json"}

// overloaded answers 503 with Retry-After.
func (c *Collector) overloaded(w http.ResponseWriter) {
	c.stats.overloaded.Add(1)
	secs := int64((c.opts.RetryAfter + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	writeError(w, http.StatusServiceUnavailable, "event collector busy; retry later", -1)
}

// writeError answers {"error": msg} and, when index >= 0, the index of the
// offending event.
func writeError(w http.ResponseWriter, code int, msg string, index int) {
	b := append([]byte(`{"error":`), jsonenc.AppendString(nil, msg)...)
	if index >= 0 {
		b = append(b, `,"event":`...)
		b = strconv.AppendInt(b, int64(index), 10)
	}
	b = append(b, "}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(b)
}

// ListQuery selects recent events: time in [From, To) when set, Name and
// Source (matching device, client or session) when not empty, at most
// Limit, newest first.
type ListQuery struct {
	From, To int64
	Name     string
	Source   string
	Limit    int
}

// Recent returns the events of the in-memory ring that match q, newest
// (by arrival) first. The ring holds the last RecentEvents events only.
func (c *Collector) Recent(q ListQuery) []Event {
	if q.Limit <= 0 {
		q.Limit = defaultListLimit
	}
	// The ring keeps canonical lines. Under the lock, the lines that may
	// match are copied out (cheap byte checks leave most others behind);
	// they are decoded after it, so that a GET never holds up a POST
	// for the time of decoding thousands of lines.
	var name, source []byte
	if q.Name != "" {
		name = append(append([]byte(`,"name":`), jsonenc.AppendString(nil, q.Name)...), `,"source":{`...)
	}
	if q.Source != "" {
		source = jsonenc.AppendString(nil, q.Source)
	}
	var buf []byte
	var ends []int
	c.mu.Lock()
	c.recent.each(func(line []byte) bool {
		if t, ok := lineTime(line); ok && (q.From != 0 && t < q.From || q.To != 0 && t >= q.To) {
			return true
		}
		if name != nil && !bytes.Contains(line, name) || source != nil && !bytes.Contains(line, source) {
			return true
		}
		buf = append(buf, line...)
		ends = append(ends, len(buf))
		return true
	})
	c.mu.Unlock()
	var out []Event
	start := 0
	for _, end := range ends {
		line := buf[start:end]
		start = end
		var ev Event
		if err := json.Unmarshal(line, &ev); err != nil {
			c.log.Error("decode recent event", "err", err)
			continue
		}
		switch {
		case q.From != 0 && ev.Time < q.From, q.To != 0 && ev.Time >= q.To,
			q.Name != "" && ev.Name != q.Name,
			q.Source != "" && ev.Source.Device != q.Source && ev.Source.Client != q.Source && ev.Source.Session != q.Source:
			continue
		}
		out = append(out, ev)
		if len(out) == q.Limit {
			break
		}
	}
	return out
}

// lineTime returns the time of a canonical line without decoding it. The
// line starts {"id":"...","time":; a '"' inside the id is escaped, so
// the first `,"time":` is the key.
func lineTime(line []byte) (int64, bool) {
	const key = `,"time":`
	i := bytes.Index(line, []byte(key))
	if i < 0 {
		return 0, false
	}
	digits := line[i+len(key):]
	n := 0
	for n < len(digits) && (digits[n] >= '0' && digits[n] <= '9' || n == 0 && digits[n] == '-') {
		n++
	}
	t, err := strconv.ParseInt(string(digits[:n]), 10, 64)
	return t, err == nil
}

// serveList answers GET /api/v1/events?from=&to=&name=&source=&limit=
// with {"events": [...]}.
func (c *Collector) serveList(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	var q ListQuery
	var err error
	for _, p := range [...]struct {
		name string
		dst  *int64
	}{{"from", &q.From}, {"to", &q.To}} {
		if s := v.Get(p.name); s != "" {
			if *p.dst, err = strconv.ParseInt(s, 10, 64); err != nil {
				writeError(w, http.StatusBadRequest, p.name+" must be Unix ms", -1)
				return
			}
		}
	}
	if s := v.Get("limit"); s != "" {
		if q.Limit, err = strconv.Atoi(s); err != nil || q.Limit <= 0 || q.Limit > maxListLimit {
			writeError(w, http.StatusBadRequest, "limit must be 1 to "+strconv.Itoa(maxListLimit), -1)
			return
		}
	}
	q.Name, q.Source = v.Get("name"), v.Get("source")
	evs := c.Recent(q)
	b := make([]byte, 0, 64+len(evs)*128)
	b = append(b, `{"events":[`...)
	for i := range evs {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendJSON(b, &evs[i])
		b = b[:len(b)-1] // the newline
	}
	b = append(b, "]}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}
