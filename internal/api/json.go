package api

import (
	"encoding/json"
	"github.com/pith-historian/pith/internal/jsonenc"
	"net/http"
	"strconv"
	"sync"
)

// The hot endpoints write JSON by hand into pooled buffers: encoding/json
// reflects and allocates per value, and a 1000-point answer must cost well
// under a millisecond.

const (
	// initialBufSize fits a 1000-point answer without growing.
	initialBufSize = 32 << 10
	// maxPooledBufSize keeps one rare huge answer from pinning its buffer.
	maxPooledBufSize = 4 << 20
)

// bufPool holds *[]byte response buffers.
type bufPool struct{ p sync.Pool }

func (bp *bufPool) get() *[]byte {
	if b, ok := bp.p.Get().(*[]byte); ok {
		*b = (*b)[:0]
		return b
	}
	b := make([]byte, 0, initialBufSize)
	return &b
}

func (bp *bufPool) put(b *[]byte) {
	if cap(*b) <= maxPooledBufSize {
		bp.p.Put(b)
	}
}

// writeJSON sends body with status.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body) // a client gone mid-answer is not our error
}

// WriteError sends {"error": msg} with status: the error answer of every
// native endpoint, also for the handlers of other packages.
func WriteError(w http.ResponseWriter, status int, msg string) { writeError(w, status, msg) }

// WriteValue sends v encoded as JSON with status (500 when v does not
// encode).
func WriteValue(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, status, b)
}

// writeError sends {"error": msg}.
func writeError(w http.ResponseWriter, status int, msg string) {
	b := make([]byte, 0, 32+len(msg))
	b = append(b, `{"error":`...)
	b = jsonenc.AppendString(b, msg)
	b = append(b, '}')
	writeJSON(w, status, b)
}

// writeLineError sends a 400 {"error": msg, "line": line}.
func writeLineError(w http.ResponseWriter, line int, msg string) {
	b := make([]byte, 0, 48+len(msg))
	b = append(b, `{"error":`...)
	b = jsonenc.AppendString(b, msg)
	b = append(b, `,"line":`...)
	b = strconv.AppendInt(b, int64(line), 10)
	b = append(b, '}')
	writeJSON(w, http.StatusBadRequest, b)
}
