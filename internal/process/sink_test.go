package process

import (
	"context"
	"errors"
	"testing"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/config"
)

// flaky fails its next write when fail is set.
type flaky struct {
	memStore
	fail bool
}

func (f *flaky) Write(ctx context.Context, pts []model.Point) error {
	if f.fail {
		f.fail = false
		return errors.New("disk full")
	}
	return f.memStore.Write(ctx, pts)
}

func TestSink(t *testing.T) {
	db := &flaky{memStore: memStore{}}
	s, err := NewSink(db, []config.Input{{Tag: "p", Process: []config.ProcessStep{{PowerToKWh: str("e")}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	write := func(pts ...model.Point) error { return s.Write(ctx, pts) }
	// Out of order within a request: run in time order. Other tags pass.
	if err := write(model.Point{Tag: "p", T: 3_600_000, V: 1}, model.Point{Tag: "x", T: 1, V: 9}, model.Point{Tag: "p", T: 0, V: 1}); err != nil {
		t.Fatal(err)
	}
	// A failed write leaves the chain as it was, so the retry counts once.
	db.fail = true
	if err := write(model.Point{Tag: "p", T: 7_200_000, V: 1}); err == nil {
		t.Fatal("write did not fail")
	}
	if err := write(model.Point{Tag: "p", T: 7_200_000, V: 1}); err != nil {
		t.Fatal(err)
	}
	e := db.memStore["e"]
	if len(e) != 3 || e[2].V != 2 || len(db.memStore["x"]) != 1 || len(db.memStore["p"]) != 3 {
		t.Fatalf("e = %v, x = %v, p = %v; want e ending at 2 kWh, 1 x, 3 p", e, db.memStore["x"], db.memStore["p"])
	}
}
