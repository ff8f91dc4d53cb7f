package modbus

import (
	"reflect"
	"testing"
)

func TestPlan(t *testing.T) {
	reg := func(a Area, addr, w uint16) Item { return Item{Area: a, Address: addr, Width: w} }
	hundred := make([]Item, 100)
	for i := range hundred {
		hundred[i] = reg(HoldingRegisters, uint16(99-i), 1) // reversed on purpose
	}
	thirtyTwoFloat64s := make([]Item, 32)
	for i := range thirtyTwoFloat64s {
		thirtyTwoFloat64s[i] = reg(HoldingRegisters, uint16(4*i), 4)
	}
	tests := []struct {
		name  string
		items []Item
		want  []Block
	}{
		{"hundred consecutive registers are one read", hundred,
			[]Block{{HoldingRegisters, 0, 100}}},
		{"gap within tolerance merges", []Item{reg(HoldingRegisters, 0, 2), reg(HoldingRegisters, 12, 2)},
			[]Block{{HoldingRegisters, 0, 14}}},
		{"gap beyond tolerance splits", []Item{reg(HoldingRegisters, 0, 2), reg(HoldingRegisters, 13, 2)},
			[]Block{{HoldingRegisters, 0, 2}, {HoldingRegisters, 13, 2}}},
		{"areas never merge", []Item{reg(InputRegisters, 0, 1), reg(HoldingRegisters, 1, 1)},
			[]Block{{HoldingRegisters, 1, 1}, {InputRegisters, 0, 1}}},
		{"125 register limit", thirtyTwoFloat64s,
			[]Block{{HoldingRegisters, 0, 124}, {HoldingRegisters, 124, 4}}},
		{"overlap", []Item{reg(HoldingRegisters, 10, 4), reg(HoldingRegisters, 11, 2)},
			[]Block{{HoldingRegisters, 10, 4}}},
		{"bits", []Item{reg(Coils, 0, 0), reg(Coils, 1999, 0), reg(Coils, 2000, 0), reg(DiscreteInputs, 5, 0)},
			[]Block{{Coils, 0, 1}, {Coils, 1999, 2}, {DiscreteInputs, 5, 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPlan(tt.items, DefaultPlanOptions())
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(p.Blocks, tt.want) {
				t.Errorf("blocks = %v, want %v", p.Blocks, tt.want)
			}
			// Every item must sit inside its block.
			for i, r := range p.Refs {
				b := p.Blocks[r.Block]
				if b.Area != tt.items[i].Area || b.Address+r.Offset != tt.items[i].Address || r.Offset+r.Width > b.Quantity {
					t.Errorf("item %d ref %+v does not fit block %+v", i, r, b)
				}
			}
		})
	}
}

func TestPlanBitGapDefault(t *testing.T) {
	// The default bit gap (160) joins coils 0 and 150 but not 0 and 200.
	p, _ := NewPlan([]Item{{Area: Coils}, {Area: Coils, Address: 150}, {Area: Coils, Address: 400}}, DefaultPlanOptions())
	if len(p.Blocks) != 2 || p.Blocks[0].Quantity != 151 {
		t.Errorf("blocks = %v", p.Blocks)
	}
}

func TestPlanSlicing(t *testing.T) {
	items := []Item{
		{Area: HoldingRegisters, Address: 3, Width: 2},
		{Area: HoldingRegisters, Address: 0, Width: 1},
		{Area: Coils, Address: 9},
	}
	p, err := NewPlan(items, DefaultPlanOptions())
	if err != nil {
		t.Fatal(err)
	}
	// Responses in block order: coil 9 (coils sort first), then registers 0..4.
	data := [][]byte{{0x01}, {0, 1, 0, 0, 0, 0, 0x12, 0x34, 0x56, 0x78}}
	if got := p.Registers(0, data); string(got) != "\x12\x34\x56\x78" {
		t.Errorf("item 0 = %x", got)
	}
	if got := p.Registers(1, data); string(got) != "\x00\x01" {
		t.Errorf("item 1 = %x", got)
	}
	if v, ok := p.Bit(2, data); !v || !ok {
		t.Errorf("item 2 = %v, %v", v, ok)
	}
	if got := p.Registers(0, data[:1][:0]); got != nil {
		t.Errorf("missing payload = %x", got)
	}
}

func TestPlanErrors(t *testing.T) {
	bad := [][]Item{
		{{Area: HoldingRegisters, Address: 0, Width: 0}},
		{{Area: HoldingRegisters, Address: 65535, Width: 2}},
		{{Area: 7, Width: 1}},
		{{Area: InputRegisters, Width: 126}},
	}
	for _, items := range bad {
		if _, err := NewPlan(items, DefaultPlanOptions()); err == nil {
			t.Errorf("NewPlan(%v) accepted", items)
		}
	}
}
