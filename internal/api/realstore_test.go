package api

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/store"
)

// TestRealStore runs an import and the read endpoints against the real
// engine through WrapDB, to keep the fake honest.
func TestRealStore(t *testing.T) {
	opts := store.DefaultOptions()
	opts.Logger = slog.New(slog.DiscardHandler)
	db, err := store.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	defer db.Close()
	sopts := DefaultOptions()
	sopts.ImportBatch = 2 // several Tx.Add calls
	h := NewServer(WrapDB(db), sopts, nil).Handler()

	body := "a.x,1000,1\na.x,1500,3\na.x,3000,10,uncertain\nb.y,2000,-2.5\n"
	wantJSON(t, do(t, h, http.MethodPost, "/api/v1/import", strings.NewReader(body), nil), http.StatusOK, `{"points":4}`)
	bad := "c.z,1,1\nc.z,2,oops\n"
	wantError(t, do(t, h, http.MethodPost, "/api/v1/import", strings.NewReader(bad), nil), http.StatusBadRequest, "bad value")

	wantJSON(t, do(t, h, http.MethodGet, "/api/v1/data?tag=a.x&from=1000&to=4000&points=3", nil, nil), http.StatusOK,
		`{"tag":"a.x","agg":"mean","points":[[1000,2],[2000,null],[3000,10]]}`)
	wantJSON(t, do(t, h, http.MethodGet, "/api/v1/data?tag=a.x&from=0&to=3000&agg=raw", nil, nil), http.StatusOK,
		`{"tag":"a.x","agg":"raw","points":[[1000,1],[1500,3]]}`)
	wantError(t, do(t, h, http.MethodGet, "/api/v1/data?tag=c.z&from=0&to=10", nil, nil), http.StatusNotFound, "c.z")
	wantJSON(t, do(t, h, http.MethodGet, "/api/v1/latest?tag=b.y", nil, nil), http.StatusOK,
		`{"values":[{"tag":"b.y","ts":2000,"value":-2.5,"quality":"good"}]}`)
	wantJSON(t, do(t, h, http.MethodGet, "/api/v1/tags", nil, nil), http.StatusOK,
		`{"tags":[{"name":"a.x","first":1000,"last":3000},{"name":"b.y","first":2000,"last":2000}]}`)
}

// TestRawPaging reads more raw samples than one answer may hold from the
// real engine: the first answer stops at the cap and says where to go on,
// following next reads every sample once, and the last page says nothing.
func TestRawPaging(t *testing.T) {
	opts := store.DefaultOptions()
	opts.Logger = slog.New(slog.DiscardHandler)
	db, err := store.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	defer db.Close()
	sopts := DefaultOptions()
	h := NewServer(WrapDB(db), sopts, nil).Handler()
	total := sopts.MaxPoints + sopts.MaxPoints/2 + 1
	var body strings.Builder
	for i := 0; i < total; i++ {
		fmt.Fprintf(&body, "p.x,%d,%d\n", 1000+i*10, i)
	}
	wantJSON(t, do(t, h, http.MethodPost, "/api/v1/import", strings.NewReader(body.String()), nil), http.StatusOK,
		fmt.Sprintf(`{"points":%d}`, total))

	from, got, pages := int64(0), 0, 0
	for {
		target := fmt.Sprintf("/api/v1/data?tag=p.x&from=%d&to=%d&agg=raw&points=%d", from, 1<<40, sopts.MaxPoints)
		r := do(t, h, http.MethodGet, target, nil, nil)
		wantJSON(t, r, http.StatusOK, "")
		var page struct {
			Points    [][2]float64     `json:"points"`
			Truncated *bool            `json:"truncated"`
			Next      *json.RawMessage `json:"next"`
		}
		if err := json.Unmarshal([]byte(r.body), &page); err != nil {
			t.Fatal(err)
		}
		pages++
		for _, p := range page.Points {
			if want := float64(1000 + got*10); p[0] != want || p[1] != float64(got) {
				t.Fatalf("page %d: sample %v, want [%v %d]", pages, p, want, got)
			}
			got++
		}
		if page.Truncated == nil {
			if page.Next != nil {
				t.Fatalf("page %d: next without truncated: %s", pages, r.body[len(r.body)-60:])
			}
			break
		}
		if !*page.Truncated || page.Next == nil || len(page.Points) != sopts.MaxPoints {
			t.Fatalf("page %d: truncated %v, next %v, %d points", pages, *page.Truncated, page.Next, len(page.Points))
		}
		if from, err = strconv.ParseInt(string(*page.Next), 10, 64); err != nil {
			t.Fatalf("page %d: next %s: %v", pages, *page.Next, err)
		}
		if want := int64(1000 + got*10); from != want {
			t.Fatalf("page %d: next %d, want %d (the first sample left out)", pages, from, want)
		}
	}
	if got != total || pages != 2 {
		t.Errorf("read %d samples in %d pages, want %d in 2", got, pages, total)
	}
}
