package process

import (
	"testing"

	"github.com/pith-historian/pith/internal/model"

	"github.com/expr-lang/expr/vm"

	"github.com/pith-historian/pith/internal/config"
)

// FuzzCompileCalc feeds expressions through the tag-name rewriting and
// the compiler: neither may panic, and whatever compiles must evaluate
// without panicking (errors are fine).
//
//	go test ./internal/process -run XXX -fuzz FuzzCompileCalc -fuzztime 30s
func FuzzCompileCalc(f *testing.F) {
	for _, s := range []string{
		"(hx.t_out - hx.t_in) * hx.flow * 4.186", "max(a.b, c) + abs(x.y.z)", `site["3phase"].l1 * 2`,
		"a.b > 1 ? 1 : 0", "a?.b", "a.b.c.d / 0", "let x = 1; x", "foo(a.b)", "[1,2][a.b]", "a.b ?? c",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > 512 {
			return
		}
		c, err := CompileCalc(config.Calc{Tag: "out.x", Expr: src})
		if err != nil {
			return
		}
		in := make([]model.Sample, len(c.Inputs))
		for i := range in {
			in[i].V = float64(i) - 1
		}
		c.Eval(&vm.VM{}, in)
	})
}
