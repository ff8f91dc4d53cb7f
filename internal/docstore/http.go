package docstore

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
)

// The JSON conventions shared by the HTTP handlers of documents
// (dashboards, process pictures): errors as {"error": msg}, documents
// never cached, methods checked with an Allow header, bodies read up to a
// bound.

// WriteError answers code with {"error": msg}.
func WriteError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// WriteDoc answers code with v as JSON, not to be cached.
func WriteDoc(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// Allow reports whether r's method is one of methods (HEAD counts as GET);
// otherwise it answers 405 with an Allow header and returns false.
func Allow(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m || (m == http.MethodGet && r.Method == http.MethodHead) {
			return true
		}
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	WriteError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed (allowed: "+strings.Join(methods, ", ")+")")
	return false
}

// ReadBody reads r's body, at most maxBytes+1 bytes, so that the decoder
// sees and refuses a document that is too large.
func ReadBody(r *http.Request, maxBytes int) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, int64(maxBytes)+1))
	if err != nil {
		return nil, errors.New("read body: " + err.Error())
	}
	return b, nil
}
