package influxql

// Result is the answer to one statement: its series, or the error that
// refused it.
type Result struct {
	StatementID int
	Series      []Row
	Err         string
}

// Row is one series of an answer: InfluxDB's {"name", "tags", "columns",
// "values"}.
type Row struct {
	Name    string
	TagKeys []string // sorted; "tags" in the answer when not empty
	TagVals []string
	Columns []string
	Values  [][]Value
	timeCol bool // the first column holds times (ms)
}

// valueKind says what a Value holds.
type valueKind uint8

const (
	vNull valueKind = iota
	vFloat
	vInt
	vString
	vTime // ms since the epoch, written as the request's epoch asks
	vBool
)

// Value is one cell of a Row.
type Value struct {
	kind valueKind
	f    float64
	i    int64
	s    string
}

func nullV() Value           { return Value{} }
func floatV(f float64) Value { return Value{kind: vFloat, f: f} }
func intV(i int64) Value     { return Value{kind: vInt, i: i} }
func stringV(s string) Value { return Value{kind: vString, s: s} }
func timeV(ms int64) Value   { return Value{kind: vTime, i: ms} }
func boolV(b bool) Value     { return Value{kind: vBool, i: map[bool]int64{false: 0, true: 1}[b]} }
func (v Value) isNull() bool { return v.kind == vNull }
