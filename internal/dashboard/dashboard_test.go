package dashboard

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeAPI answers the inner reads with the path and query it saw.
var fakeAPI = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/api/v1/alarms" {
		if r.URL.RawQuery != "all=1" {
			io.WriteString(w, `{"alarms":[{"id":"history leaked"}]}`)
			return
		}
		io.WriteString(w, `{"alarms":[{"id":"boiler.hot","tag":"a.x","state":"acknowledged","acked_by":"otto"},{"id":"other","tag":"secret","state":"active"}]}`)
		return
	}
	if r.URL.Path == "/api/v1/tags" {
		io.WriteString(w, `{"tags":[{"name":"a.x","first":1,"last":2,"unit":"W"},{"name":"secret","first":1,"last":2}]}`)
		return
	}
	io.WriteString(w, r.URL.Path+"?"+r.URL.RawQuery)
})

var fakePage = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "<html>viewer</html>") })

func do(t *testing.T, h http.Handler, method, path, body string) (int, string) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, path, strings.NewReader(body)))
	if w.Code >= 400 {
		var e struct{ Error string }
		json.Unmarshal(w.Body.Bytes(), &e)
		return w.Code, e.Error
	}
	return w.Code, w.Body.String()
}

func decode(t *testing.T, s string) *Dashboard {
	t.Helper()
	var d Dashboard
	if err := json.Unmarshal([]byte(s), &d); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return &d
}

const board = `{"title":"Boiler room","widgets":[
 {"id":"w1","type":"value","x":0,"y":0,"w":3,"h":2,"tags":["a.x"],"unit":"W"},
 {"id":"w2","type":"setpoint","x":3,"y":0,"w":3,"h":2,"tags":["a.sp"]},
 {"id":"w3","type":"text","x":6,"y":0,"w":6,"h":2,"text":"# Hello <script>"}]}`

func TestLifecycle(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := NewHandler(st, fakeAPI, fakePage, nil)
	code, body := do(t, h, "POST", "/api/v1/dashboards", board)
	if code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	d := decode(t, body)
	if d.ID != "boiler-room" || d.Version != 1 || d.Schema != Schema || d.Token != "" {
		t.Fatalf("created %+v", d)
	}
	if code, body = do(t, h, "POST", "/api/v1/dashboards", board); code != 201 || decode(t, body).ID != "boiler-room-2" {
		t.Fatalf("second create: %d %s", code, body)
	}
	// A title whose id would be a route gets another id.
	if code, body = do(t, h, "POST", "/api/v1/dashboards", `{"title":"Import"}`); code != 201 || decode(t, body).ID != "dashboard-import" {
		t.Fatalf("create titled Import: %d %s", code, body)
	}
	// A save names the version it replaces; a stale one is refused.
	d.Title, d.Public = "Boiler", true
	b, _ := json.Marshal(d)
	if code, body = do(t, h, "PUT", "/api/v1/dashboards/boiler-room", string(b)); code != 200 {
		t.Fatalf("put: %d %s", code, body)
	}
	d2 := decode(t, body)
	if d2.Version != 2 || d2.Token == "" {
		t.Fatalf("after put %+v", d2)
	}
	if code, body = do(t, h, "PUT", "/api/v1/dashboards/boiler-room", string(b)); code != 409 {
		t.Fatalf("stale put: %d %s", code, body)
	}
	// The public page: the viewer, the document without token or writers,
	// and reads of its own tags only.
	tok := d2.Token
	if code, body = do(t, h, "GET", "/d/"+tok, ""); code != 200 || !strings.Contains(body, "viewer") {
		t.Fatalf("public page: %d %s", code, body)
	}
	code, body = do(t, h, "GET", "/d/"+tok+"/dashboard.json", "")
	if pv := decode(t, body); code != 200 || pv.Token != "" || len(pv.Widgets) != 2 {
		t.Fatalf("public doc: %d %s", code, body)
	}
	for _, tc := range []struct {
		path string
		code int
		want string
	}{
		{"/d/" + tok + "/api/v1/data?tag=a.x&from=0&to=10", 200, "/api/v1/data?"},
		{"/d/" + tok + "/api/v1/latest", 200, "tag=a.x"},
		{"/d/" + tok + "/api/v1/data?tag=secret&from=0&to=10", 403, "not on this dashboard"},
		{"/d/" + tok + "/api/v1/data?tag=a.sp&from=0&to=10", 403, "not on this dashboard"}, // a setpoint's tag is not public
		{"/d/" + tok + "/api/v1/data?tag=a.x&from=0&to=10&points=100000", 400, "at most"},
		{"/d/" + tok + "/api/v1/control", 404, "not found"},
		{"/d/" + tok + "/api/v1/tags", 200, `"a.x"`},
		{"/d/nope/dashboard.json", 404, "no such public"},
	} {
		code, body := do(t, h, "GET", tc.path, "")
		if code != tc.code || !strings.Contains(body, tc.want) || (code == 200 && strings.Contains(body, "secret")) {
			t.Errorf("%s: %d %s, want %d with %q", tc.path, code, body, tc.code, tc.want)
		}
	}
	if code, _ = do(t, h, "POST", "/d/"+tok, ""); code != 405 {
		t.Errorf("POST public: %d", code)
	}
	// Duplicate and export drop the public token; import makes a new one.
	code, body = do(t, h, "POST", "/api/v1/dashboards/boiler-room/duplicate", "")
	if dup := decode(t, body); code != 201 || dup.Public || dup.Token != "" || dup.Title != "Boiler (copy)" {
		t.Fatalf("duplicate: %d %s", code, body)
	}
	code, exp := do(t, h, "GET", "/api/v1/dashboards/boiler-room/export", "")
	if code != 200 || strings.Contains(exp, tok) {
		t.Fatalf("export: %d %s", code, exp)
	}
	code, body = do(t, h, "POST", "/api/v1/dashboards/import", exp)
	if imp := decode(t, body); code != 201 || imp.ID == "boiler-room" || len(imp.Widgets) != 3 {
		t.Fatalf("import: %d %s", code, body)
	}
	// Everything survives a reopen, byte for byte in meaning.
	st2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(st2.List()) != len(st.List()) {
		t.Fatalf("reopen: %d dashboards, want %d", len(st2.List()), len(st.List()))
	}
	if got, _ := st2.ByToken(tok); got == nil || got.Version != 2 {
		t.Fatalf("reopen: token lost")
	}
	// Private again: the token stops working.
	d2.Public = false
	b, _ = json.Marshal(d2)
	if code, body = do(t, h, "PUT", "/api/v1/dashboards/boiler-room", string(b)); code != 200 {
		t.Fatalf("unpublish: %d %s", code, body)
	}
	if code, _ = do(t, h, "GET", "/d/"+tok+"/dashboard.json", ""); code != 404 {
		t.Errorf("old token still answers: %d", code)
	}
	if code, _ = do(t, h, "DELETE", "/api/v1/dashboards/boiler-room", ""); code != 204 {
		t.Errorf("delete: %d", code)
	}
	if _, err := os.Stat(filepath.Join(dir, Dir, "boiler-room.json")); !os.IsNotExist(err) {
		t.Errorf("file left after delete: %v", err)
	}
	if code, _ = do(t, h, "GET", "/api/v1/dashboards/boiler-room", ""); code != 404 {
		t.Errorf("get deleted: %d", code)
	}
}

func TestBadDocuments(t *testing.T) {
	st, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := NewHandler(st, fakeAPI, fakePage, nil)
	w := func(s string) string {
		return `{"title":"x","widgets":[` + s + `]}`
	}
	for _, tc := range []struct{ body, want string }{
		{`{"title":"x","colour":"red"}`, "unknown field \"colour\""},
		{w(`{"id":"a","type":"clock","x":0,"y":0,"w":1,"h":1,"tags":["t"]}`), "type \"clock\""},
		{w(`{"id":"a","type":"value","x":10,"y":0,"w":3,"h":1,"tags":["t"]}`), "must fit"},
		{w(`{"id":"a","type":"value","x":0,"y":0,"w":3,"h":1}`), "needs a tag"},
		{w(`{"id":"a","type":"value","x":0,"y":0,"w":3,"h":1,"tags":["t","u"]}`), "one tag"},
		{w(`{"id":"a","type":"text","x":0,"y":0,"w":3,"h":1},{"id":"a","type":"text","x":0,"y":1,"w":3,"h":1}`), "used twice"},
		{w(`{"id":"a","type":"trend","x":0,"y":0,"w":3,"h":1,"tags":["t"],"range":"forever"}`), "range"},
		{`{"id":"../etc","title":"x"}`, "id \"../etc\""},
		{`{"id":"import","title":"x"}`, "id \"import\""},
		{`{"title":"x\u0000"}`, "control character"},
		{`{"title":"x"} {}`, "after the document"},
		{w(`{"id":"a","type":"value","x":0,"y":0,"w":3,"h":1,"tags":["t"],"color_by":"alarm"}`), "only a lamp"},
		{w(`{"id":"a","type":"lamp","x":0,"y":0,"w":3,"h":1,"tags":["t"],"color_by":"mood"}`), "color_by \"mood\""},
	} {
		code, body := do(t, h, "POST", "/api/v1/dashboards", tc.body)
		if code != 400 || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s, want 400 with %q", tc.body, code, body, tc.want)
		}
	}
}

// TestOpenRefusesDamagedFile: a file that does not decode stops the start
// with its name instead of vanishing from the list.
func TestOpenRefusesDamagedFile(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, Dir), 0o755)
	os.WriteFile(filepath.Join(dir, Dir, "x.json"), []byte(`{"title":`), 0o644)
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "x.json") {
		t.Fatalf("open: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(board))
	f.Add([]byte(`{"widgets":[{"id":"a","type":"gauge","x":0,"y":0,"w":1,"h":1,"tags":["t"],"min":0,"max":-1}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := Decode(b)
		if err != nil {
			return
		}
		if d.Check() == nil {
			// A valid document re-encodes and decodes to a valid one.
			out, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			d2, err := Decode(out)
			if err != nil || d2.Check() != nil {
				t.Fatalf("round trip of a valid document: %v", err)
			}
		}
	})
}

// TestPublicAlarms: a public page reads the current state of the alarms of
// its own tags only, never the history, and not who acknowledged them.
func TestPublicAlarms(t *testing.T) {
	st, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := NewHandler(st, fakeAPI, fakePage, nil)
	d, err := st.Create(&Dashboard{Title: "lamp", Public: true, Widgets: []Widget{
		{ID: "l", Type: "lamp", X: 0, Y: 0, W: 3, H: 2, Tags: []string{"a.x"}, ColorBy: "alarm"}}}, false)
	if err != nil {
		t.Fatal(err)
	}
	code, body := do(t, h, "GET", "/d/"+d.Token+"/api/v1/alarms?history=1&from=0", "")
	if code != 200 || !strings.Contains(body, `"boiler.hot"`) || strings.Contains(body, "other") ||
		strings.Contains(body, "otto") || strings.Contains(body, "history") {
		t.Fatalf("public alarms: %d %s", code, body)
	}
}
