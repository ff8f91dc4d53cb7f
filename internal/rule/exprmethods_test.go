package rule

import (
	"reflect"
	"testing"
	"time"

	"github.com/expr-lang/expr"
)

// Pith builds expr from third_party/expr, whose method calls go through
// a fixed table instead of reflect's MethodByName (which would make the
// linker keep every exported method in the binary). These are the calls
// the documented language allows on the values of expr's builtins.
func TestExprTimeMethods(t *testing.T) {
	cases := []struct {
		src  string
		want any
	}{
		{`date("2024-03-05T06:07:08Z").Year()`, 2024},
		{`date("2024-03-05T06:07:08Z").Hour()`, 6},
		{`date("2024-03-05T06:07:08Z").Weekday().String()`, "Tuesday"},
		{`date("2024-03-05T06:07:08Z").Month().String()`, "March"},
		{`date("2024-03-05T06:07:08Z").Format("2006-01-02")`, "2024-03-05"},
		{`date("2024-03-05T06:07:08Z").Add(duration("1h")).Hour()`, 7},
		{`date("2024-03-05T06:07:08Z").UnixMilli()`, int64(1709618828000)},
		{`duration("90m").Hours()`, 1.5},
		{`duration("90m").String()`, "1h30m0s"},
		{`date("2024-03-05T06:07:08Z").Sub(date("2024-03-05T00:00:00Z")).Minutes()`, 367.1333333333333},
		{`now().Year() >= 2024`, true},
		{`date("2024-03-05T06:07:08Z").In(timezone("Europe/Bratislava")).Hour()`, 7},
	}
	for _, c := range cases {
		p, err := expr.Compile(c.src)
		if err != nil {
			t.Errorf("compile %s: %v", c.src, err)
			continue
		}
		got, err := expr.Run(p, nil)
		if err != nil {
			t.Errorf("run %s: %v", c.src, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s = %#v, want %#v", c.src, got, c.want)
		}
	}
}

// The table holds every exported method of the types expr's builtins
// return; a newer Go that adds one must add it there too.
func TestExprMethodTableComplete(t *testing.T) {
	for _, v := range []any{time.Time{}, time.Duration(0), time.Month(1), time.Weekday(0), time.UTC} {
		rt := reflect.TypeOf(v)
		for i := range rt.NumMethod() {
			m := rt.Method(i)
			switch m.Name {
			case "MarshalBinary", "MarshalJSON", "MarshalText", "GobEncode", "AppendBinary", "AppendText":
				continue // encodings, not values an expression works with
			}
			src := "x." + m.Name
			if _, err := expr.Compile(src, expr.Env(map[string]any{"x": v})); err != nil {
				t.Errorf("%v has method %s but expressions cannot reach it: %v", rt, m.Name, err)
			}
		}
	}
}
