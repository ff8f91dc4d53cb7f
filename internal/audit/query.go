package audit

import (
	"encoding/csv"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pith-historian/pith/internal/api"
)

// Limits of a query.
const (
	DefaultLimit = 1000
	MaxLimit     = 100_000
)

// Filter selects records. Empty fields select everything.
type Filter struct {
	From, To int64  // Unix ms, [From, To)
	Who      string // exact user or key name
	Action   string // exact action
	Text     string // case-insensitive substring of target, result, detail or from
	Limit    int    // newest records kept; 0 is DefaultLimit
}

func (f *Filter) match(r *Record) bool {
	if r.T < f.From || r.T >= f.To {
		return false
	}
	if f.Who != "" && r.Who != f.Who {
		return false
	}
	if f.Action != "" && r.Action != f.Action {
		return false
	}
	if f.Text != "" {
		q := strings.ToLower(f.Text)
		for _, s := range []string{r.Target, r.Result, r.Detail, r.From, r.Who} {
			if strings.Contains(strings.ToLower(s), q) {
				return true
			}
		}
		return false
	}
	return true
}

// Query returns the newest f.Limit records matching f, newest first.
func (j *Journal) Query(f Filter) ([]Record, error) {
	if f.Limit <= 0 {
		f.Limit = DefaultLimit
	}
	if f.To == 0 {
		f.To = math.MaxInt64
	}
	days, err := j.days()
	if err != nil {
		return nil, err
	}
	var out []Record
	for i := len(days) - 1; i >= 0 && len(out) < f.Limit; i-- {
		d, _ := time.Parse(time.DateOnly, days[i])
		if d.UnixMilli() >= f.To || d.Add(24*time.Hour).UnixMilli() <= f.From {
			continue
		}
		var day []Record
		if err := j.scan(days[i], func(r Record) bool {
			if f.match(&r) {
				day = append(day, r)
			}
			return true
		}); err != nil {
			return nil, err
		}
		slices.Reverse(day)
		out = append(out, day...)
	}
	if len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

// Handler serves GET /api/v1/audit?from=MS&to=MS&who=NAME&action=A&q=TEXT
// &limit=N[&format=csv]: the newest matching records, newest first, as
// JSON {"records": [...]} or a CSV download.
func (j *Journal) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			api.WriteError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed")
			return
		}
		q := r.URL.Query()
		var f Filter
		var err error
		if f.From, err = msParam(q.Get("from"), 0); err != nil {
			api.WriteError(w, http.StatusBadRequest, "from: "+err.Error())
			return
		}
		if f.To, err = msParam(q.Get("to"), math.MaxInt64); err != nil {
			api.WriteError(w, http.StatusBadRequest, "to: "+err.Error())
			return
		}
		f.Who, f.Action, f.Text = q.Get("who"), q.Get("action"), q.Get("q")
		if s := q.Get("limit"); s != "" {
			if f.Limit, err = strconv.Atoi(s); err != nil || f.Limit < 1 || f.Limit > MaxLimit {
				api.WriteError(w, http.StatusBadRequest, fmt.Sprintf("limit: want 1 to %d", MaxLimit))
				return
			}
		}
		recs, err := j.Query(f)
		if err != nil {
			api.WriteError(w, http.StatusInternalServerError, err.Error())
			return
		}
		switch q.Get("format") {
		case "", "json":
			if recs == nil {
				recs = []Record{}
			}
			api.WriteValue(w, http.StatusOK, map[string]any{"records": recs})
		case "csv":
			w.Header().Set("Content-Type", "text/csv; charset=utf-8")
			w.Header().Set("Content-Disposition", `attachment; filename="pith-audit.csv"`)
			writeCSV(w, recs)
		default:
			api.WriteError(w, http.StatusBadRequest, "format: want json or csv")
		}
	})
}

func msParam(s string, def int64) (int64, error) {
	if s == "" {
		return def, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("want Unix milliseconds, got %q", s)
	}
	return v, nil
}

// csvHeader names the columns of the CSV export.
var csvHeader = []string{"seq", "time", "who", "kind", "role", "from", "action", "target", "old", "new", "result", "detail"}

// writeCSV writes recs as CSV. Cells come from clients (user names, tag
// names, messages): a cell starting with = + - or @ gets a leading ' so
// that a spreadsheet shows it rather than running it as a formula.
func writeCSV(w http.ResponseWriter, recs []Record) {
	cw := csv.NewWriter(w)
	cw.Write(csvHeader)
	num := func(v *float64) string {
		if v == nil {
			return ""
		}
		return strconv.FormatFloat(*v, 'g', -1, 64)
	}
	for _, r := range recs {
		row := []string{strconv.FormatUint(r.Seq, 10), time.UnixMilli(r.T).UTC().Format(time.RFC3339Nano),
			r.Who, r.Kind, r.Role, r.From, r.Action, r.Target, num(r.Old), num(r.New), r.Result, r.Detail}
		for i := 2; i < len(row); i++ {
			if i == 8 || i == 9 {
				continue // numbers, which may be negative
			}
			row[i] = CSVCell(row[i])
		}
		cw.Write(row)
	}
	cw.Flush()
}

// CSVCell defuses a spreadsheet formula in s (CSV injection).
func CSVCell(s string) string {
	if s != "" && strings.ContainsRune("=+-@", rune(s[0])) {
		return "'" + s
	}
	return s
}

// For returns a record of action on target by whoever sent r: the
// principal the key or session check found, and the client's address.
func For(r *http.Request, action, target string) Record {
	rec := Record{Action: action, Target: target, From: r.RemoteAddr}
	if p := api.PrincipalOf(r.Context()); p != nil {
		rec.Who, rec.Kind, rec.Role = p.Name, p.Kind, p.Role
	}
	return rec
}
