package agent

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/config"
)

// docReq makes a request to an instance and returns the status and body.
func docReq(t *testing.T, in *instance, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, in.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := httpc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestDocumentsForwardedToCentral runs an edge Pith forwarding to the
// NATS server in PITH_TEST_NATS and a central Pith consuming from it:
// a dashboard made at the edge lands at the central Pith under its site
// (without its public token), every save brings the new version, a delete
// removes it, the edge's restart sends nothing it already sent, and the
// same id made again after the delete replaces the tombstone; a process
// picture follows the same path.
func TestDocumentsForwardedToCentral(t *testing.T) {
	nurl := testNATS(t)
	site := testSiteName("dashdocs")
	durable := "c-" + site
	t.Cleanup(func() { deleteConsumer(t, nurl, durable) })
	ccfg := fwdConfig(t, "central", t.TempDir())
	ccfg.Central = config.Central{NATS: nurl, Subjects: []string{"pith." + site + ".samples"}, Durable: durable, Workers: 2}
	edir := t.TempDir()
	ecfg := fwdConfig(t, site, edir)
	ecfg.Forward.NATS = []config.ForwardNATS{{Name: "fleet", URL: nurl}}
	edge := startInstance(t, ecfg)
	central := startInstance(t, ccfg)

	code, body := docReq(t, edge, "POST", "/api/v1/dashboards", `{"id":"plant","title":"Plant","public":true,"widgets":[
		{"id":"w1","type":"value","x":0,"y":0,"w":3,"h":2,"tags":["hx.t_out"]}]}`)
	if code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	var made struct {
		Token   string
		Version int64
	}
	json.Unmarshal([]byte(body), &made)
	path := "/api/v1/documents/" + site + "/dashboard/plant"
	var got string
	eventually(t, 20*time.Second, "the dashboard at the central Pith", func() bool {
		code, got = docReq(t, central, "GET", path, "")
		return code == 200
	})
	if !strings.Contains(got, `"title":"Plant"`) || !strings.Contains(got, `"version":1`) || made.Token == "" || strings.Contains(got, made.Token) {
		t.Fatalf("central copy %s (edge token %q must not travel)", got, made.Token)
	}
	// A save brings version 2.
	code, body = docReq(t, edge, "PUT", "/api/v1/dashboards/plant", `{"title":"Plant room","version":1,"widgets":[]}`)
	if code != 200 {
		t.Fatalf("put: %d %s", code, body)
	}
	eventually(t, 20*time.Second, "version 2 at the central Pith", func() bool {
		_, got = docReq(t, central, "GET", path, "")
		return strings.Contains(got, `"version":2`)
	})
	if !strings.Contains(got, `"title":"Plant room"`) {
		t.Fatalf("version 2: %s", got)
	}
	_, list := docReq(t, central, "GET", "/api/v1/documents?site="+site, "")
	if !strings.Contains(list, `"id":"plant"`) || !strings.Contains(list, `"kind":"dashboard"`) || strings.Contains(list, `"document"`) {
		t.Fatalf("list: %s", list)
	}
	// The edge restarts: its state file says version 2 is upstream.
	edge.stop(t)
	b, err := os.ReadFile(filepath.Join(edir, "forward", "fleet", "documents.json"))
	if err != nil || !strings.Contains(string(b), `"dashboard/plant"`) || !strings.Contains(string(b), `"version": 2`) {
		t.Fatalf("edge document state: %s %v", b, err)
	}
	edge = startInstance(t, ecfg)
	// A delete removes it at the central Pith.
	if code, body := docReq(t, edge, "DELETE", "/api/v1/dashboards/plant", ""); code != 204 {
		t.Fatalf("delete: %d %s", code, body)
	}
	eventually(t, 20*time.Second, "the delete at the central Pith", func() bool {
		code, _ := docReq(t, central, "GET", path, "")
		return code == 404
	})
	// The same id again (version 1, saved after the delete) replaces the tombstone.
	time.Sleep(5 * time.Millisecond)
	if code, body := docReq(t, edge, "POST", "/api/v1/dashboards", `{"id":"plant","title":"Plant again","widgets":[]}`); code != 201 {
		t.Fatalf("create again: %d %s", code, body)
	}
	eventually(t, 20*time.Second, "the new dashboard at the central Pith", func() bool {
		_, got = docReq(t, central, "GET", path, "")
		return strings.Contains(got, `"title":"Plant again"`)
	})
	// Process pictures travel the same way, sanitised as the edge stored them.
	code, body = docReq(t, edge, "POST", "/api/v1/pictures", `{"id":"boiler","title":"Boiler",
		"svg":"<svg xmlns=\"http://www.w3.org/2000/svg\"><rect id=\"lvl\" onclick=\"alert(1)\" width=\"10\" height=\"10\"/></svg>",
		"bindings":[{"element":"lvl","tag":"hx.t_out","kind":"level","min":0,"max":100}]}`)
	if code != 201 {
		t.Fatalf("create picture: %d %s", code, body)
	}
	ppath := "/api/v1/documents/" + site + "/picture/boiler"
	eventually(t, 20*time.Second, "the picture at the central Pith", func() bool {
		code, got = docReq(t, central, "GET", ppath, "")
		return code == 200
	})
	if !strings.Contains(got, `"title":"Boiler"`) || !strings.Contains(got, `lvl`) || strings.Contains(got, "onclick") {
		t.Fatalf("central copy of the picture: %s", got)
	}
	if _, list := docReq(t, central, "GET", "/api/v1/documents?site="+site+"&kind=picture", ""); !strings.Contains(list, `"id":"boiler"`) || !strings.Contains(list, `"kind":"picture"`) || strings.Contains(list, `"kind":"dashboard"`) {
		t.Fatalf("pictures of the site: %s", list)
	}
	if code, body := docReq(t, edge, "DELETE", "/api/v1/pictures/boiler", ""); code != 204 && code != 200 {
		t.Fatalf("delete picture: %d %s", code, body)
	}
	eventually(t, 20*time.Second, "the picture's delete at the central Pith", func() bool {
		code, _ := docReq(t, central, "GET", ppath, "")
		return code == 404
	})
	// An edge's own API has no sites' documents: only a central Pith serves them.
	if code, _ := docReq(t, edge, "GET", "/api/v1/documents", ""); code == 200 {
		t.Fatalf("edge serves /api/v1/documents")
	}
}
