package picture

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/docstore"
)

const tank = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 100 100"><rect id="lvl" width="10" height="50"/><text id="t">0</text></svg>`

func f(v float64) *float64 { return &v }

func sample() *Picture {
	return &Picture{Title: "Boiler house", SVG: tank, Bindings: []Binding{
		{Element: "t", Tag: "boiler.temp", Kind: "text", Unit: "°C"},
		{Element: "lvl", Tag: "boiler.level", Kind: "level", Min: f(0), Max: f(100), Control: true},
	}}
}

func TestStoreVersionsAndReload(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := st.Create(sample(), false)
	if err != nil {
		t.Fatal(err)
	}
	if p.ID != "boiler-house" || p.Version != 1 || p.Schema != Schema {
		t.Fatalf("created %q version %d schema %d", p.ID, p.Version, p.Schema)
	}
	if s, err := st.Create(&Picture{Title: "Sanitize", SVG: tank}, false); err != nil || s.ID != "picture-sanitize" {
		t.Fatalf("a title naming a route: %v %v", s, err)
	}
	named := sample()
	named.ID = p.ID
	if _, err := st.Create(named, false); !errors.Is(err, docstore.ErrExists) {
		t.Fatalf("second create without rename: %v", err)
	}
	if c, err := st.Create(sample(), true); err != nil || c.ID != "boiler-house-2" {
		t.Fatalf("rename: %v %v", c, err)
	}
	edit := *p
	edit.Title = "Boiler"
	p2, err := st.Put(p.ID, &edit)
	if err != nil || p2.Version != 2 {
		t.Fatalf("put: %v %v", p2, err)
	}
	if _, err := st.Put(p.ID, &edit); !errors.Is(err, docstore.ErrConflict) {
		t.Fatalf("stale put: %v", err)
	}
	st2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := st2.Get(p.ID)
	if err != nil || got.Title != "Boiler" || got.Version != 2 || len(got.Bindings) != 2 {
		t.Fatalf("reloaded %+v %v", got, err)
	}
	if err := st2.Delete(p.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, Dir, p.ID+".json")); !os.IsNotExist(err) {
		t.Fatalf("file left after delete: %v", err)
	}
	// A file that does not decode stops the start, naming the file.
	os.WriteFile(filepath.Join(dir, Dir, "bad.json"), []byte(`{"svg": 1}`), 0o644)
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "bad.json") {
		t.Fatalf("open with a bad file: %v", err)
	}
}

func TestCheck(t *testing.T) {
	for name, mut := range map[string]func(*Picture){
		"unknown kind":   func(p *Picture) { p.Bindings[0].Kind = "blink" },
		"level no range": func(p *Picture) { p.Bindings[1].Max = nil },
		"fill no states": func(p *Picture) { p.Bindings[0].Kind = "fill" },
		"bad colour":     func(p *Picture) { p.Bindings[0].Kind, p.Bindings[0].States = "fill", []State{{Color: "red;x:url(y)"}} },
		"unordered states": func(p *Picture) {
			p.Bindings[0].Kind, p.Bindings[0].States = "fill", []State{{1, "red", ""}, {0, "blue", ""}}
		},
		"bad element": func(p *Picture) { p.Bindings[0].Element = `" onload="x` },
		"not svg":     func(p *Picture) { p.SVG = "<html/>" },
		"empty svg":   func(p *Picture) { p.SVG = "" },
		"schema":      func(p *Picture) { p.Schema = 9 },
	} {
		p := sample()
		mut(p)
		if err := p.Check(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestHTTPSanitisesOnStoreAndServe(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(NewHandler(st, nil))
	defer srv.Close()
	evil := sample()
	evil.SVG = `<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><script>alert(2)</script><rect id="lvl"/><text id="t">0</text></svg>`
	body, _ := json.Marshal(evil)
	r, err := http.Post(srv.URL+"/api/v1/pictures", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	var got Picture
	json.NewDecoder(r.Body).Decode(&got)
	r.Body.Close()
	if r.StatusCode != http.StatusCreated || strings.Contains(got.SVG, "alert") {
		t.Fatalf("create: %d %q", r.StatusCode, got.SVG)
	}
	file, _ := os.ReadFile(filepath.Join(dir, Dir, got.ID+".json"))
	if strings.Contains(string(file), "alert") {
		t.Fatalf("stored unsanitised: %s", file)
	}
	// A file changed behind Pith's back is sanitised when served.
	var onDisk map[string]any
	json.Unmarshal(file, &onDisk)
	svg := onDisk["svg"].(string)
	onDisk["svg"] = strings.Replace(svg, `<rect id="lvl">`, `<rect id="lvl" onclick="alert(3)"><script>alert(4)</script>`, 1)
	if onDisk["svg"] == svg {
		t.Fatalf("test did not alter the file: %s", file)
	}
	raw, _ := json.Marshal(onDisk)
	st.Delete(got.ID)
	os.WriteFile(filepath.Join(dir, Dir, got.ID+".json"), []byte(raw), 0o644)
	st2, _ := Open(dir)
	srv.Config.Handler = NewHandler(st2, nil)
	for _, path := range []string{"/api/v1/pictures/" + got.ID, "/api/v1/pictures/" + got.ID + "/svg"} {
		r, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := r.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		r.Body.Close()
		if r.StatusCode != 200 || strings.Contains(b.String(), "alert") {
			t.Errorf("GET %s: %d %s", path, r.StatusCode, b.String())
		}
		if strings.HasSuffix(path, "/svg") && !strings.Contains(r.Header.Get("Content-Security-Policy"), "sandbox") {
			t.Errorf("svg served without a sandboxing policy: %q", r.Header.Get("Content-Security-Policy"))
		}
	}
	// Stale versions conflict; bad documents name the field.
	r, _ = http.Post(srv.URL+"/api/v1/pictures", "application/json", strings.NewReader(`{"title":"x","svg":"<svg/>","bindings":[{"element":"a","tag":"t","kind":"wobble"}]}`))
	var e map[string]string
	json.NewDecoder(r.Body).Decode(&e)
	r.Body.Close()
	if r.StatusCode != 400 || !strings.Contains(e["error"], "bindings[0]: kind") {
		t.Errorf("bad binding: %d %v", r.StatusCode, e)
	}
}
