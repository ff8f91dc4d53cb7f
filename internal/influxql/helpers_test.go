package influxql

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/store"
)

// testNow is the now() of every test statement: 2023-11-14T22:18:20Z,
// after the scripts' data.
var testNow = time.UnixMilli(1700000300000).UTC()

// openStore returns a real store in a temporary directory.
func openStore(t testing.TB) *store.DB {
	t.Helper()
	opts := store.DefaultOptions()
	opts.Logger = slog.New(slog.DiscardHandler)
	db, err := store.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// lpPoint is one field value of a line-protocol line as Pith stores it:
// the tag named by the line-protocol rule (measurement, tag values in key
// order, field, joined by dots) and its labels.
type lpPoint struct {
	tag    string
	labels model.Labels
	t      int64
	v      float64
}

// parseLP reads the test scripts' line protocol: `m,k=v f=1,g=2 ms`, no
// escapes, timestamps in ms.
func parseLP(line string) ([]lpPoint, error) {
	parts := strings.Fields(line)
	if len(parts) != 3 {
		return nil, fmt.Errorf("want `series fields ms`, got %q", line)
	}
	ts, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("timestamp %q: %v", parts[2], err)
	}
	head := strings.Split(parts[0], ",")
	m := head[0]
	kvs := head[1:]
	sort.Strings(kvs)
	pairs := []string{model.LabelMeasurement, m}
	name := []string{m}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("tag %q", kv)
		}
		pairs = append(pairs, k, v)
		name = append(name, v)
	}
	var out []lpPoint
	for _, fv := range strings.Split(parts[1], ",") {
		f, v, ok := strings.Cut(fv, "=")
		if !ok {
			return nil, fmt.Errorf("field %q", fv)
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, fmt.Errorf("field %q: %v", fv, err)
		}
		out = append(out, lpPoint{tag: strings.Join(append(name, f), "."),
			labels: model.LabelsFrom(append(pairs, model.LabelField, f)...), t: ts, v: x})
	}
	return out, nil
}

// loadLP writes line-protocol lines into db with their labels.
func loadLP(t testing.TB, db *store.DB, lines []string) {
	t.Helper()
	var pts []model.Point
	labels := map[string]model.Labels{}
	for _, l := range lines {
		ps, err := parseLP(l)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			pts = append(pts, model.Point{Tag: p.tag, T: p.t, V: p.v})
			labels[p.tag] = p.labels
		}
	}
	var ser []model.Series
	for tag, ls := range labels {
		ser = append(ser, model.Series{Tag: tag, Labels: ls})
	}
	if err := db.SetLabels(context.Background(), ser); err != nil {
		t.Fatalf("set labels: %v", err)
	}
	if err := db.Write(context.Background(), pts); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// newTestHandler serves /query over db at testNow.
func newTestHandler(db *store.DB) *Handler {
	return NewHandler(NewEngine(db, NewStoreCatalog(db), DefaultOptions()), func() time.Time { return testNow }, slog.New(slog.DiscardHandler))
}

// script is one query script of testdata/queries: data, then queries and
// the answers InfluxDB 1.x gives to them.
type script struct {
	name  string
	load  []string
	evals []evalCase
}

// evalCase is one query of a script.
type evalCase struct {
	line   int
	query  string
	epoch  string
	csv    bool
	status int
	nopeer bool // depends on now() or on Pith's own refusals: not run against InfluxDB
	want   string
}

// readScripts reads every script under testdata/queries.
//
// A script is blocks separated by blank lines. `load` is followed by
// line-protocol lines (ms timestamps). `eval [epoch=E] [csv] [status=N]
// [nopeer]` is followed by one query line and the expected answer's
// lines, where a line "." stands for an empty one. Lines starting with # are comments.
func readScripts(t testing.TB) []script {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "queries", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	var out []script
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		s := script{name: filepath.Base(f)}
		var block []string
		var start int
		flush := func() {
			if len(block) == 0 {
				return
			}
			head := strings.Fields(block[0])
			switch head[0] {
			case "load":
				s.load = append(s.load, block[1:]...)
			case "eval":
				if len(block) < 3 {
					t.Fatalf("%s:%d: eval needs a query and an answer", f, start)
				}
				want := append([]string(nil), block[2:]...)
				for i, l := range want {
					if l == "." { // an empty line of the answer
						want[i] = ""
					}
				}
				e := evalCase{line: start, query: block[1], status: 200, want: strings.Join(want, "\n")}
				for _, a := range head[1:] {
					switch {
					case strings.HasPrefix(a, "epoch="):
						e.epoch = strings.TrimPrefix(a, "epoch=")
					case a == "csv":
						e.csv = true
					case a == "nopeer":
						e.nopeer = true
					case strings.HasPrefix(a, "status="):
						e.status, _ = strconv.Atoi(strings.TrimPrefix(a, "status="))
					default:
						t.Fatalf("%s:%d: unknown eval option %q", f, start, a)
					}
				}
				s.evals = append(s.evals, e)
			default:
				t.Fatalf("%s:%d: unknown block %q", f, start, head[0])
			}
			block = nil
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 1<<20)
		n := 0
		for sc.Scan() {
			n++
			l := sc.Text()
			if strings.HasPrefix(l, "#") {
				continue
			}
			if strings.TrimSpace(l) == "" {
				flush()
				continue
			}
			if len(block) == 0 {
				start = n
			}
			block = append(block, l)
		}
		flush()
		fh.Close()
		out = append(out, s)
	}
	return out
}

// queryURL is the /query request of an eval case.
func (e evalCase) queryURL(base string) string {
	v := url.Values{"q": {e.query}, "db": {"pith"}}
	if e.epoch != "" {
		v.Set("epoch", e.epoch)
	}
	return base + "/query?" + v.Encode()
}

// do runs an eval case against h, returning status and body.
func (e evalCase) do(t testing.TB, h http.Handler) (int, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, e.queryURL(""), nil)
	if e.csv {
		req.Header.Set("Accept", "application/csv")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Body)
	return rec.Code, string(body)
}

// sameAnswer compares two answers: JSON by value, CSV by text.
func sameAnswer(csv bool, got, want string) bool {
	if csv {
		return strings.TrimRight(got, "\n") == strings.TrimRight(want, "\n")
	}
	var g, w any
	dg := json.NewDecoder(strings.NewReader(got))
	dg.UseNumber()
	dw := json.NewDecoder(strings.NewReader(want))
	dw.UseNumber()
	if dg.Decode(&g) != nil || dw.Decode(&w) != nil {
		return false
	}
	return reflect.DeepEqual(normNumbers(g), normNumbers(w))
}

// normNumbers turns JSON numbers into float64 so 1 and 1.0 compare equal.
func normNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return x.String()
		}
		return f
	case []any:
		for i := range x {
			x[i] = normNumbers(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = normNumbers(x[k])
		}
	}
	return v
}
