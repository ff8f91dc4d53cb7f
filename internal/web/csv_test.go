package web

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestCSVCell runs the dashboard's csvCell (static/js/util.js, used by the
// trend page's CSV download, the one CSV export a person opens in a
// spreadsheet) under Node: cells starting with = + - @ get a leading ',
// quotes are doubled, everything is quoted. Skipped without node.
func TestCSVCell(t *testing.T) {
	cases := []struct{ in, want string }{
		{"boiler.temp mean", `"boiler.temp mean"`},
		{"=HYPERLINK(\"http://x\")", `"'=HYPERLINK(""http://x"")"`},
		{"+cmd|' /C calc'!A0", `"'+cmd|' /C calc'!A0"`},
		{"-2+3", `"'-2+3"`},
		{"@SUM(A1)", `"'@SUM(A1)"`},
		{"a=b", `"a=b"`},
		{"", `""`},
	}
	var ins []string
	for _, c := range cases {
		ins = append(ins, c.in)
	}
	arg, _ := json.Marshal(ins)
	out := runUtil(t, "csvCell", "console.log(JSON.stringify("+string(arg)+".map(csvCell)));")
	var got []string
	if err := json.Unmarshal(out, &got); err != nil || len(got) != len(cases) {
		t.Fatalf("node printed %q: %v", out, err)
	}
	for i, c := range cases {
		if got[i] != c.want {
			t.Errorf("csvCell(%q) = %s, want %s", c.in, got[i], c.want)
		}
	}
}

// runUtil runs script under Node with name imported from static/js/util.js
// and returns what it printed; it skips the test without node.
func runUtil(t *testing.T, name, script string) []byte {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not installed")
	}
	util, err := filepath.Abs("static/js/util.js")
	if err != nil {
		t.Fatal(err)
	}
	src := "import { " + name + " } from " + string(mustJSON(t, "file://"+util)) + ";\n" + script + "\n"
	out, err := exec.Command(node, "--input-type=module", "-e", src).CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	return out
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFmtValueText runs the dashboard's fmtValue under Node: the value of
// a text tag (a JSON string in /api/v1/live and /latest) is shown as it
// is, numbers as before. Skipped without node.
func TestFmtValueText(t *testing.T) {
	out := runUtil(t, "fmtValue", `console.log(JSON.stringify(["RUN", "", "12", 1.23456789, 7, null].map(fmtValue)));`)
	if want := `["RUN","","12","1.23457","7","—"]`; string(out) != want+"\n" {
		t.Fatalf("fmtValue: %s, want %s", out, want)
	}
}

// TestReplaceHash runs the dashboard's replaceHash under Node: a view
// writes its state into the URL only while the URL names that view, so a
// late callback of the view a person left (the live stream's first
// snapshot) cannot take the URL, and with it the next route, back to it.
// Skipped without node.
func TestReplaceHash(t *testing.T) {
	// Each case: the URL's hash, the view that writes, its query; the
	// hash after.
	cases := [][4]string{
		{"#/live", "live", "q=boiler", "#/live?q=boiler"},
		{"", "live", "q=a", "#/live?q=a"},
		{"#/", "live", "", "#/live"},
		{"#/control", "live", "q=a", "#/control"},
		{"#/control?tag=x", "live", "", "#/control?tag=x"},
		{"#/trend?tag=a", "trend", "tag=b", "#/trend?tag=b"},
		{"#/trend?tag=a", "tags", "q=x", "#/trend?tag=a"},
		{"#/tags?q=x", "tags", "", "#/tags"},
	}
	out := runUtil(t, "replaceHash", "globalThis.location = {};\n"+
		"globalThis.history = { replaceState: (s, t, u) => { location.hash = u; } };\n"+
		"console.log(JSON.stringify("+string(mustJSON(t, cases))+
		".map(([h, v, q]) => { location.hash = h; replaceHash(v, new URLSearchParams(q)); return location.hash; })));")
	var got []string
	if err := json.Unmarshal(out, &got); err != nil || len(got) != len(cases) {
		t.Fatalf("node printed %q: %v", out, err)
	}
	for i, c := range cases {
		if got[i] != c[3] {
			t.Errorf("at %q, replaceHash(%q, %q) left %q, want %q", c[0], c[1], c[2], got[i], c[3])
		}
	}
}
