// Package methods is the fixed table of Go methods that expressions may
// call. Upstream expr looks methods up with reflect's Method and
// MethodByName, which makes the Go linker keep every exported method of
// every type in the program (about 3.7 MB of a 24 MB Pith). Here the
// lookups go through this table instead: the methods of the values expr's
// own builtins return (now(), date(), duration(), timezone()), so that
// date("2024-01-02").Year() or now().Hour() work as documented.
package methods

import (
	"reflect"
	"sort"
	"time"
)

// entry is one method: its name and its method expression (a function
// whose first parameter is the receiver).
type entry struct {
	name string
	fn   reflect.Value
}

func e(name string, fn any) entry { return entry{name, reflect.ValueOf(fn)} }

// table holds, per receiver type, its methods sorted by name (as reflect
// sorts them), so that an index means the same as reflect's.
var table = func() map[reflect.Type][]entry {
	t := map[reflect.Type][]entry{
		reflect.TypeOf(time.Time{}): {
			e("Add", time.Time.Add), e("AddDate", time.Time.AddDate), e("After", time.Time.After),
			e("AppendFormat", time.Time.AppendFormat), e("Before", time.Time.Before), e("Clock", time.Time.Clock),
			e("Compare", time.Time.Compare), e("Date", time.Time.Date), e("Day", time.Time.Day), e("Equal", time.Time.Equal),
			e("Format", time.Time.Format), e("GoString", time.Time.GoString), e("Hour", time.Time.Hour),
			e("ISOWeek", time.Time.ISOWeek), e("In", time.Time.In), e("IsDST", time.Time.IsDST),
			e("IsZero", time.Time.IsZero), e("Local", time.Time.Local), e("Location", time.Time.Location),
			e("Minute", time.Time.Minute), e("Month", time.Time.Month), e("Nanosecond", time.Time.Nanosecond),
			e("Round", time.Time.Round), e("Second", time.Time.Second), e("String", time.Time.String),
			e("Sub", time.Time.Sub), e("Truncate", time.Time.Truncate), e("UTC", time.Time.UTC),
			e("Unix", time.Time.Unix), e("UnixMicro", time.Time.UnixMicro), e("UnixMilli", time.Time.UnixMilli),
			e("UnixNano", time.Time.UnixNano), e("Weekday", time.Time.Weekday), e("Year", time.Time.Year),
			e("YearDay", time.Time.YearDay), e("Zone", time.Time.Zone), e("ZoneBounds", time.Time.ZoneBounds),
		},
		reflect.TypeOf(time.Duration(0)): {
			e("Abs", time.Duration.Abs), e("Hours", time.Duration.Hours),
			e("Microseconds", time.Duration.Microseconds), e("Milliseconds", time.Duration.Milliseconds),
			e("Minutes", time.Duration.Minutes), e("Nanoseconds", time.Duration.Nanoseconds),
			e("Round", time.Duration.Round), e("Seconds", time.Duration.Seconds),
			e("String", time.Duration.String), e("Truncate", time.Duration.Truncate),
		},
		reflect.TypeOf(time.Month(0)):         {e("String", time.Month.String)},
		reflect.TypeOf(time.Weekday(0)):       {e("String", time.Weekday.String)},
		reflect.TypeOf((*time.Location)(nil)): {e("String", (*time.Location).String)},
	}
	for _, ms := range t {
		sort.Slice(ms, func(i, j int) bool { return ms[i].name < ms[j].name })
	}
	return t
}()

// Num returns the number of methods of t in the table.
func Num(t reflect.Type) int { return len(table[t]) }

// ByIndex returns t's i-th method as reflect.Type.Method(i) would: its
// Type and Func take the receiver first.
func ByIndex(t reflect.Type, i int) reflect.Method {
	m := table[t][i]
	return reflect.Method{Name: m.name, Type: m.fn.Type(), Func: m.fn, Index: i}
}

// ByName returns t's method called name as reflect.Type.MethodByName would.
func ByName(t reflect.Type, name string) (reflect.Method, bool) {
	ms := table[t]
	i := sort.Search(len(ms), func(i int) bool { return ms[i].name >= name })
	if i == len(ms) || ms[i].name != name {
		return reflect.Method{}, false
	}
	return ByIndex(t, i), true
}

// Bind returns v's i-th method bound to v, as reflect.Value.Method(i).
func Bind(v reflect.Value, i int) reflect.Value {
	ms := table[v.Type()]
	if i < 0 || i >= len(ms) {
		return reflect.Value{}
	}
	fn := ms[i].fn
	ft := fn.Type()
	in := make([]reflect.Type, ft.NumIn()-1)
	for k := range in {
		in[k] = ft.In(k + 1)
	}
	out := make([]reflect.Type, ft.NumOut())
	for k := range out {
		out[k] = ft.Out(k)
	}
	bound := reflect.FuncOf(in, out, ft.IsVariadic())
	return reflect.MakeFunc(bound, func(args []reflect.Value) []reflect.Value {
		full := append([]reflect.Value{v}, args...)
		if ft.IsVariadic() {
			return fn.CallSlice(full)
		}
		return fn.Call(full)
	})
}

// BindByName returns v's method called name bound to v, as
// reflect.Value.MethodByName.
func BindByName(v reflect.Value, name string) reflect.Value {
	if !v.IsValid() {
		return reflect.Value{}
	}
	m, ok := ByName(v.Type(), name)
	if !ok {
		return reflect.Value{}
	}
	return Bind(v, m.Index)
}
