package ingest

import (
	"log/slog"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/store"
)

// TestCSVText reads quoted text rows beside numbers, with the line of
// every row, and refuses bad text naming the line.
func TestCSVText(t *testing.T) {
	body := "a,1,1\nb,2,\"RUN\"\nb,3,\"a \"\"q\"\", c\",bad\na,4,2\nc,5,\"\"\n"
	cr := NewCSVReader(strings.NewReader(body))
	pts, err := cr.Next(nil, 100)
	if err != nil {
		t.Fatal(err)
	}
	want := []model.TextPoint{{Tag: "b", T: 2, Text: "RUN"}, {Tag: "b", T: 3, Text: `a "q", c`, Q: model.QualityBad}, {Tag: "c", T: 5, Text: ""}}
	if len(pts) != 2 || pts[1].V != 2 {
		t.Fatalf("numbers %+v", pts)
	}
	got := cr.Texts()
	if len(got) != len(want) {
		t.Fatalf("texts %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("text %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if cr.PointLine(0) != 1 || cr.PointLine(1) != 4 || cr.TextLine(0) != 2 || cr.TextLine(2) != 5 {
		t.Fatalf("lines: %d %d %d %d", cr.PointLine(0), cr.PointLine(1), cr.TextLine(0), cr.TextLine(2))
	}
	for _, c := range []struct{ body, err string }{
		{"a,1,\"open\n", "closing quote"},
		{"a,1,\"x\"y\n", "after the closing quote"},
		{"a,1,\"x\",worse\n", "unknown quality"},
		{"a,1,\"" + strings.Repeat("é", 513) + "\"\n", "longer than 1024"},
		{"a,1,\"\xff\"\n", "UTF-8"},
	} {
		cr := NewCSVReader(strings.NewReader("z,0,0\n" + c.body))
		_, err := cr.Next(nil, 100)
		var le *LineError
		if err == nil || !strings.Contains(err.Error(), c.err) || !errorsAs(err, &le) || le.Line != 2 {
			t.Errorf("%q: %v, want line 2: %s", c.body, err, c.err)
		}
	}
}

func errorsAs(err error, le **LineError) bool {
	e, ok := err.(*LineError)
	*le = e
	return ok
}

// TestLineProtocolText writes string fields into a real store: they
// become text tags, stored with the request's numbers; escapes are
// undone, and a string field of a numeric tag is refused naming its line.
func TestLineProtocolText(t *testing.T) {
	opts := store.DefaultOptions()
	opts.Logger = slog.New(slog.DiscardHandler)
	db, err := store.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	h := NewLineProtocol(db, DefaultLineProtocolOptions())
	post := func(body string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/write?precision=ms", strings.NewReader(body)))
		return rec
	}
	rec := post("line,unit=1 speed=12.5,state=\"RUN \\\"fast\\\"\",op=\"Zoë\" 1000\nline,unit=1 state=\"STOP\" 2000\n")
	if rec.Code != 204 || rec.Header().Get("X-Pith-Points") != "4" || rec.Header().Get("X-Pith-Skipped-Strings") != "0" {
		t.Fatalf("write: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	got, err := db.RawText("line.1.state", 0, 1<<50, 0)
	if err != nil || len(got) != 2 || got[0].Text != `RUN "fast"` || got[1].Text != "STOP" {
		t.Fatalf("state: %+v %v", got, err)
	}
	if l, _ := db.Latest("line.1.op"); len(l) != 1 || l[0].Text != "Zoë" {
		t.Fatalf("op: %+v", l)
	}
	rec = post("line,unit=1 speed=1 3000\nline,unit=1 speed=\"fast\" 3000\n")
	if rec.Code != 400 || !strings.Contains(rec.Body.String(), `"line":2`) {
		t.Fatalf("kind: %d %s", rec.Code, rec.Body)
	}
	if s, _ := db.Raw("line.1.speed", 0, 1<<50, 0); len(s) != 1 {
		t.Fatalf("a refused request stored %d numbers", len(s)-1)
	}
	rec = post("m s=\"" + strings.Repeat("x", 1025) + "\"\n")
	if rec.Code != 400 || !strings.Contains(rec.Body.String(), "longer than 1024") {
		t.Fatalf("long text: %d %s", rec.Code, rec.Body)
	}
}

// FuzzCSVText: text rows that parse are valid text values, and quoting
// them again (a quote doubled) parses back to the same values.
// Run: go test -run '^$' -fuzz FuzzCSVText -fuzztime 60s ./internal/ingest/
func FuzzCSVText(f *testing.F) {
	f.Add([]byte("b,2,\"RUN\"\nb,3,\"a \"\"q\"\", c\",bad\n"))
	f.Add([]byte("a,1,\"\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cr := NewCSVReader(strings.NewReader(string(data)))
		var texts []model.TextPoint
		for {
			_, err := cr.Next(nil, 7)
			texts = append(texts, cr.Texts()...)
			if err != nil {
				break
			}
		}
		var b strings.Builder
		for _, p := range texts {
			if err := model.CheckText(p.Text); err != nil {
				t.Fatalf("parsed invalid text %q: %v", p.Text, err)
			}
			b.WriteString(p.Tag + "," + itoa64(p.T) + ",\"" + strings.ReplaceAll(p.Text, `"`, `""`) + "\"," + p.Q.String() + "\n")
		}
		cr = NewCSVReader(strings.NewReader(b.String()))
		if _, err := cr.Next(nil, len(texts)+1); err != nil && len(texts) > 0 {
			t.Fatalf("re-parse: %v", err)
		}
		got := cr.Texts()
		if len(got) != len(texts) {
			t.Fatalf("%d values re-parsed, want %d", len(got), len(texts))
		}
		for i := range got {
			if got[i] != texts[i] {
				t.Fatalf("value %d: %+v became %+v", i, texts[i], got[i])
			}
		}
	})
}

func itoa64(v int64) string { return strconv.FormatInt(v, 10) }
