package sitedocs

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/forward"
)

// TestNewestWins: versions delivered out of order keep the newest; a
// tombstone keeps an older version delivered late out; a document made
// again after its delete replaces the tombstone; names that could leave
// the folder are refused.
func TestNewestWins(t *testing.T) {
	s := Open(t.TempDir())
	put := func(site string, d forward.Doc) bool {
		t.Helper()
		kept, err := s.Put(site, d)
		if err != nil {
			t.Fatal(err)
		}
		return kept
	}
	doc := func(v, upd int64, body string) forward.Doc {
		return forward.Doc{Kind: "dashboard", ID: "plant", Version: v, Updated: upd, JSON: []byte(body)}
	}
	steps := []struct {
		d    forward.Doc
		kept bool
		want string // served document, "" for 404
	}{
		{doc(2, 200, `{"v":2}`), true, `{"v":2}`},
		{doc(1, 100, `{"v":1}`), false, `{"v":2}`}, // late
		{doc(2, 200, `{"v":2}`), false, `{"v":2}`}, // repeat
		{forward.Doc{Kind: "dashboard", ID: "plant", Version: 2, Updated: 300, Deleted: true}, true, ""},
		{doc(2, 200, `{"v":2}`), false, ""}, // redelivered after the delete
		{doc(1, 400, `{"again":1}`), true, `{"again":1}`},
	}
	for i, st := range steps {
		if got := put("edge1", st.d); got != st.kept {
			t.Fatalf("step %d: kept %v, want %v", i, got, st.kept)
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest("GET", "/api/v1/documents/edge1/dashboard/plant", nil))
		if st.want == "" && w.Code != 404 || st.want != "" && strings.TrimSpace(w.Body.String()) != st.want {
			t.Fatalf("step %d: %d %s, want %q", i, w.Code, w.Body, st.want)
		}
	}
	for _, site := range []string{"..", "a/b", "", "."} {
		if _, err := s.Put(site, doc(1, 1, `{}`)); err == nil {
			t.Errorf("site %q accepted", site)
		}
	}
	if _, err := s.Put("edge1", forward.Doc{Kind: "dashboard", ID: "../x", Version: 1, Updated: 1, JSON: []byte(`{}`)}); err == nil {
		t.Error("id ../x accepted")
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest("GET", "/api/v1/documents?kind=dashboard", nil))
	if !strings.Contains(w.Body.String(), `"site":"edge1"`) || strings.Contains(w.Body.String(), "again") {
		t.Fatalf("list %s", w.Body)
	}
}
