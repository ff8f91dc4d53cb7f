package process

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"

	"github.com/pith-historian/pith/internal/config"
)

// maxExprLen bounds an expression's source; a longer one is a mistake.
const maxExprLen = 4096

// Calc is one compiled calculated tag.
//
// Tag names in an expression: expr-lang reads "hx.t_out" as the member
// t_out of a variable hx. Compile rewrites every such member chain whose
// root is a variable and whose parts are plain names (hx.t_out, a.b.c,
// hx["t out"] too) into one variable named by the whole dotted path, and
// the expression runs on a flat map from tag name to value. A tag name
// that is not a valid identifier segment (e.g. "site.3phase.l1") can be
// written with brackets: site["3phase"].l1.
type Calc struct {
	Tag    string
	Expr   string
	Period time.Duration
	Unit   string
	Desc   string
	// Inputs are the tags the expression reads, sorted.
	Inputs []string

	prog *vm.Program
	env  map[string]any // tag name -> value, the expression's variables
	last []float64      // the values in env, per Inputs
	set  bool           // env holds the inputs' values (last is valid)
}

// CompileCalc compiles one [[calc]]. The expression must give a number.
func CompileCalc(c config.Calc) (*Calc, error) {
	if len(c.Expr) > maxExprLen {
		return nil, fmt.Errorf("compile calc %q: expression longer than %d bytes", c.Tag, maxExprLen)
	}
	// Pass 1 finds the tag names; pass 2 compiles against an environment
	// holding exactly those, so that an unknown function or a misuse of a
	// value is a compile error rather than a runtime one.
	col := newNamer()
	if _, err := expr.Compile(c.Expr, expr.Patch(col)); err != nil {
		return nil, fmt.Errorf("compile calc %q: %w", c.Tag, err)
	}
	if len(col.lets) > 0 {
		return nil, fmt.Errorf("compile calc %q: let is not supported (tag names are the only variables)", c.Tag)
	}
	for _, f := range col.calls {
		return nil, fmt.Errorf("compile calc %q: unknown function %q", c.Tag, f)
	}
	var inputs []string
	for n, refs := range col.names {
		if refs > 0 {
			inputs = append(inputs, n)
		}
	}
	sort.Strings(inputs)
	env := make(map[string]any, len(inputs))
	for _, n := range inputs {
		env[n] = 0.0
	}
	prog, err := expr.Compile(c.Expr, expr.Env(env), expr.Patch(newNamer()), expr.AsFloat64())
	if err != nil {
		return nil, fmt.Errorf("compile calc %q: %w", c.Tag, err)
	}
	for _, in := range inputs {
		if in == c.Tag {
			return nil, fmt.Errorf("compile calc %q: reads itself", c.Tag)
		}
	}
	return &Calc{Tag: c.Tag, Expr: c.Expr, Period: c.Period.Std(), Unit: c.Unit, Desc: c.Description,
		Inputs: inputs, prog: prog, env: env, last: make([]float64, len(inputs))}, nil
}

// Eval runs the expression on the given input values (one per Inputs, in
// order). The result's quality is the worst of the inputs'; a bad input,
// a run-time error or a non-finite result gives a bad result.
func (c *Calc) Eval(m *vm.VM, in []model.Sample) (float64, model.Quality, error) {
	q := model.QualityGood
	for i := range c.Inputs {
		q = worse(q, in[i].Q)
		// Boxing a float64 into the map allocates: skip unchanged ones.
		if v := in[i].V; v != c.last[i] || !c.set {
			c.env[c.Inputs[i]], c.last[i] = v, v
		}
	}
	c.set = true
	if q == model.QualityBad {
		return 0, q, nil
	}
	out, err := m.Run(c.prog, c.env)
	if err != nil {
		return 0, model.QualityBad, fmt.Errorf("evaluate calc %q: %w", c.Tag, err)
	}
	v, ok := out.(float64)
	if !ok {
		return 0, model.QualityBad, fmt.Errorf("evaluate calc %q: result %T is not a number", c.Tag, out)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return v, model.QualityBad, nil
	}
	return v, q, nil
}

// namer is the expr patch that turns member chains over variables into
// single dotted variables and records every variable read.
type namer struct {
	names map[string]int  // variable -> references
	lets  map[string]bool // names bound by let
	calls []string        // names called as functions (none are defined)
}

func newNamer() *namer {
	return &namer{names: make(map[string]int), lets: make(map[string]bool)}
}

func (n *namer) Visit(node *ast.Node) {
	switch x := (*node).(type) {
	case *ast.IdentifierNode:
		n.names[x.Value]++
	case *ast.VariableDeclaratorNode:
		n.lets[x.Name] = true
	case *ast.CallNode:
		if id, ok := x.Callee.(*ast.IdentifierNode); ok {
			n.names[id.Value]--
			n.calls = append(n.calls, id.Value)
		}
	case *ast.MemberNode:
		if x.Optional || x.Method {
			return
		}
		root, ok := x.Node.(*ast.IdentifierNode)
		prop, ok2 := x.Property.(*ast.StringNode)
		if !ok || !ok2 || n.lets[root.Value] || prop.Value == "" {
			return
		}
		name := root.Value + "." + prop.Value
		// The root was counted when the walk passed it; here it is only
		// the first segment of a longer name.
		n.names[root.Value]--
		n.names[name]++
		ast.Patch(node, &ast.IdentifierNode{Value: name})
	}
}

// ErrCycle is returned (wrapped, naming the tags) when calculated tags
// depend on each other in a loop.
var ErrCycle = errors.New("calculated tags form a cycle")

// order sorts calcs so that each comes after the calcs it reads, or
// returns an error wrapping ErrCycle naming the tags of one cycle.
func order(calcs []*Calc) ([]*Calc, error) {
	by := make(map[string]*Calc, len(calcs))
	for _, c := range calcs {
		by[c.Tag] = c
	}
	const (
		white = iota
		grey
		black
	)
	color := make(map[string]int, len(calcs))
	out := make([]*Calc, 0, len(calcs))
	var stack []string
	var visit func(c *Calc) error
	visit = func(c *Calc) error {
		switch color[c.Tag] {
		case black:
			return nil
		case grey:
			i := len(stack) - 1
			for i > 0 && stack[i] != c.Tag {
				i--
			}
			return fmt.Errorf("order calcs: %w: %s -> %s", ErrCycle, strings.Join(stack[i:], " -> "), c.Tag)
		}
		color[c.Tag] = grey
		stack = append(stack, c.Tag)
		for _, in := range c.Inputs {
			if d, ok := by[in]; ok {
				if err := visit(d); err != nil {
					return err
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[c.Tag] = black
		out = append(out, c)
		return nil
	}
	// Visit in a fixed order so that the error names the same cycle on
	// every start.
	sorted := append([]*Calc(nil), calcs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Tag < sorted[j].Tag })
	for _, c := range sorted {
		if err := visit(c); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Check compiles the calculated tags and orders them, as New and
// NewRecomputer do, without running anything: `pith check-config` uses it,
// since the config package cannot compile expressions.
func Check(calcs []config.Calc) error {
	var compiled []*Calc
	for i, cc := range calcs {
		c, err := CompileCalc(cc)
		if err != nil {
			return fmt.Errorf("calc[%d]: %w", i, err)
		}
		if len(c.Inputs) == 0 && c.Period == 0 {
			return fmt.Errorf("calc[%d]: compile calc %q: reads no tag, so it needs a period", i, c.Tag)
		}
		compiled = append(compiled, c)
	}
	_, err := order(compiled)
	return err
}
