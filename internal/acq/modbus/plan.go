package modbus

import (
	"fmt"
	"slices"
)

// Item is one value a station wants: a register range or a single bit.
type Item struct {
	Area    Area
	Address uint16
	Width   uint16 // registers (1, 2 or 4); ignored for bit areas, which read one bit
}

// Block is one read request of a plan.
type Block struct {
	Area     Area
	Address  uint16
	Quantity uint16 // registers or bits
}

// Request returns the read request for the block at the given unit.
func (b Block) Request(unit uint8) Request {
	return Request{Unit: unit, Function: b.Area.ReadFunction(), Address: b.Address, Quantity: b.Quantity}
}

// PlanOptions tunes read planning.
type PlanOptions struct {
	// MaxGap is how many unwanted registers may be read between two items
	// to save a request; reading a few spare registers costs far less than
	// a round trip.
	MaxGap uint16
	// MaxBitGap is the same for coils and discrete inputs, in bits.
	MaxBitGap uint16
	// MaxRegisters caps a register read; some devices accept fewer than
	// the protocol's 125.
	MaxRegisters uint16
	// MaxBits caps a bit read; the protocol allows 2000.
	MaxBits uint16
}

// DefaultPlanOptions returns the planning defaults.
func DefaultPlanOptions() PlanOptions {
	return PlanOptions{MaxGap: 10, MaxBitGap: 160, MaxRegisters: MaxReadRegisters, MaxBits: MaxReadBits}
}

// Ref locates one item's data inside the responses to a plan's blocks.
type Ref struct {
	Block  int    // index into Plan.Blocks
	Offset uint16 // registers or bits from the block's start
	Width  uint16 // registers, or 1 for a bit
}

// Plan is the minimal list of read requests covering a list of items.
type Plan struct {
	Blocks []Block
	Refs   []Ref // Refs[i] locates items[i]
}

// NewPlan merges the items into as few reads as the limits allow: items of
// the same area are sorted by address and joined while the gap between them
// is at most the allowed gap and the block stays within the size limit.
// Overlapping items are fine.
func NewPlan(items []Item, opts PlanOptions) (*Plan, error) {
	if opts.MaxRegisters == 0 || opts.MaxRegisters > MaxReadRegisters {
		opts.MaxRegisters = MaxReadRegisters
	}
	if opts.MaxBits == 0 || opts.MaxBits > MaxReadBits {
		opts.MaxBits = MaxReadBits
	}
	p := &Plan{Refs: make([]Ref, len(items))}
	order := make([]int, len(items))
	for i, it := range items {
		order[i] = i
		w := it.width()
		if it.Area > InputRegisters {
			return nil, fmt.Errorf("plan item %d: unknown area %d", i, it.Area)
		}
		if w == 0 || (!it.Area.IsBit() && w > opts.MaxRegisters) {
			return nil, fmt.Errorf("plan item %d: width %d out of range", i, it.Width)
		}
		if int(it.Address)+int(w) > 0x10000 {
			return nil, fmt.Errorf("plan item %d: address %d + width %d beyond 65535", i, it.Address, w)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int {
		x, y := items[a], items[b]
		if x.Area != y.Area {
			return int(x.Area) - int(y.Area)
		}
		return int(x.Address) - int(y.Address)
	})
	cur := -1 // index of the open block
	for _, i := range order {
		it := items[i]
		w := it.width()
		limit, gap := int(opts.MaxRegisters), int(opts.MaxGap)
		if it.Area.IsBit() {
			limit, gap = int(opts.MaxBits), int(opts.MaxBitGap)
		}
		if cur >= 0 {
			b := &p.Blocks[cur]
			end := int(b.Address) + int(b.Quantity)
			newEnd := max(end, int(it.Address)+int(w))
			if b.Area == it.Area && int(it.Address) <= end+gap && newEnd-int(b.Address) <= limit {
				b.Quantity = uint16(newEnd - int(b.Address))
				p.Refs[i] = Ref{Block: cur, Offset: it.Address - b.Address, Width: w}
				continue
			}
		}
		p.Blocks = append(p.Blocks, Block{Area: it.Area, Address: it.Address, Quantity: w})
		cur = len(p.Blocks) - 1
		p.Refs[i] = Ref{Block: cur, Width: w}
	}
	return p, nil
}

func (it Item) width() uint16 {
	if it.Area.IsBit() {
		return 1
	}
	return it.Width
}

// Registers returns item i's register bytes out of the blocks' response
// payloads (data[j] answers Blocks[j], as returned by Client.Do), or nil
// when a payload is missing or too short.
func (p *Plan) Registers(i int, data [][]byte) []byte {
	r := p.Refs[i]
	if r.Block >= len(data) {
		return nil
	}
	lo, hi := 2*int(r.Offset), 2*int(r.Offset+r.Width)
	if hi > len(data[r.Block]) {
		return nil
	}
	return data[r.Block][lo:hi]
}

// Bit returns item i's bit out of the blocks' packed response payloads, and
// false as its second result when the payload is missing or too short.
func (p *Plan) Bit(i int, data [][]byte) (bool, bool) {
	r := p.Refs[i]
	if r.Block >= len(data) || int(r.Offset)/8 >= len(data[r.Block]) {
		return false, false
	}
	return data[r.Block][r.Offset/8]&(1<<(r.Offset%8)) != 0, true
}
