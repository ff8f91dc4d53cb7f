package config

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/pith-historian/pith/internal/acq/modbus"
)

// indexPlaceholder is replaced by the element index when an entry with
// count = N expands into N values.
const indexPlaceholder = "{i}"

// maxAddressEnd is one past the last Modbus address.
const maxAddressEnd = 1 << 16

// ModbusTag is one value a station reads, typed, defaults applied and count
// expanded.
type ModbusTag struct {
	// Name is the tag name, "{i}" replaced.
	Name string
	// Area and Address locate the value's first register or bit.
	Area    modbus.Area
	Address uint16
	// Type is the value's type; Type.Registers() addresses are read.
	Type modbus.Type
	// Order is the byte order of the value's registers.
	Order modbus.Order
	// Scale and Offset convert the raw value: value = raw*Scale + Offset.
	Scale  float64
	Offset float64
	// Unit is the engineering unit, Description the tag's description.
	Unit        string
	Description string
	// Archive is the archive policy, Deadband its threshold with
	// ArchiveDeadband.
	Archive  Archive
	Deadband float64
	// Entry is the index in ModbusClient.Tags of the entry this value came
	// from and Index its position within that entry's count, for messages
	// that point back at the file.
	Entry int
	Index int
}

// ModbusRegister is one value a server publishes, typed, defaults applied and
// count expanded.
type ModbusRegister struct {
	// Tag is the tag published, "{i}" replaced.
	Tag string
	// Area and Address locate the value's first register or bit.
	Area    modbus.Area
	Address uint16
	// Type and Order are the register encoding of the value.
	Type  modbus.Type
	Order modbus.Order
	// Scale and Offset convert the tag's value: raw = (value-Offset)/Scale.
	Scale  float64
	Offset float64
	// Writable lets clients write the value.
	Writable bool
	// Entry is the index in ModbusServer.Registers of the entry this value
	// came from and Index its position within that entry's count.
	Entry int
	Index int
}

// ExpandedTags returns the station's tags typed, with each count = N entry
// expanded into N values. Errors name keys relative to the station, such as
// "tags[3].register: ..."; a Config that validated has none.
func (c *ModbusClient) ExpandedTags() ([]ModbusTag, error) {
	tags, errs := c.expandTags("tags")
	return tags, errors.Join(errs...)
}

// ExpandedRegisters returns the server's registers typed, with each
// count = N entry expanded into N values, sorted by area and address. Errors
// name keys relative to the server, such as "registers[1].register: ..."; a
// Config that validated has none.
func (s *ModbusServer) ExpandedRegisters() ([]ModbusRegister, error) {
	regs, errs := s.expandRegisters("registers")
	return regs, errors.Join(errs...)
}

// entry is what tag and register entries share once parsed.
type entry struct {
	area  modbus.Area
	addr  uint16
	typ   modbus.Type
	order modbus.Order
	width int
	// areaOK is set when the register key parsed, even if other keys of
	// the entry did not.
	areaOK bool
}

// parseEntry checks and parses the fields tag and register entries share;
// ok is false when an error was recorded.
func parseEntry(errs *[]error, path, register, typ, order string, count int, scale, offset float64) (e entry, ok bool) {
	n := len(*errs)
	fail := func(key, format string, args ...any) {
		*errs = append(*errs, keyErrorf(path+"."+key, format, args...))
	}
	// The zero values of the modbus enums are valid values, so each parse
	// keeps its own flag for the checks that combine fields.
	var err error
	areaOK, typeOK, orderOK := true, true, true
	if e.area, e.addr, err = parseRegister(register); err != nil {
		fail("register", "%v", err)
		areaOK = false
	}
	e.areaOK = areaOK
	if e.typ, err = parseType(typ); err != nil {
		fail("type", "%v", err)
		typeOK = false
	}
	if e.order, err = parseOrder(order); err != nil {
		fail("order", "%v", err)
		orderOK = false
	}
	if areaOK && typeOK && e.area.IsBit() != (e.typ == modbus.Bool) {
		if e.typ == modbus.Bool {
			fail("type", "bool needs a coil or discrete register, not %s", e.area)
		} else {
			fail("type", "%s registers hold bool, not %s", e.area, e.typ)
		}
	}
	if typeOK && e.typ == modbus.Bool {
		if orderOK && e.order != modbus.ABCD {
			fail("order", "does not apply to bool")
		}
		if scale != 1 {
			fail("scale", "does not apply to bool")
		}
		if offset != 0 {
			fail("offset", "does not apply to bool")
		}
	} else {
		if scale == 0 || math.IsNaN(scale) || math.IsInf(scale, 0) {
			fail("scale", "must be a finite number other than 0")
		}
		if math.IsNaN(offset) || math.IsInf(offset, 0) {
			fail("offset", "must be a finite number")
		}
	}
	switch {
	case count < 1:
		fail("count", "must be at least 1, got %d", count)
	case count > maxAddressEnd:
		// Checked first so that count*width below cannot overflow.
		fail("count", "%d is more values than the 65536 addresses of an area", count)
	}
	e.width = int(e.typ.Registers())
	if areaOK && typeOK && count >= 1 && count <= maxAddressEnd {
		if end := int(e.addr) + count*e.width; end > maxAddressEnd {
			key := "register"
			if count > 1 {
				key = "count"
			}
			fail(key, "%d value(s) of %s from %s:%d end at address %d, past 65535", count, e.typ, e.area, e.addr, end-1)
		}
	}
	return e, len(*errs) == n
}

// areaRank orders the areas as the file format lists them (holding, input,
// coil, discrete), the order ExpandedRegisters sorts by.
func areaRank(a modbus.Area) int {
	for i, v := range areas {
		if v == a {
			return i
		}
	}
	return len(areas)
}

// expandName returns name with "{i}" replaced by each index 0..count-1,
// checking that the result is a valid tag name; key is the name's key path.
func expandName(errs *[]error, key, name string, count int) ([]string, bool) {
	if count > 1 && !strings.Contains(name, indexPlaceholder) {
		*errs = append(*errs, keyErrorf(key, "count > 1 needs %q in the name so that each value gets its own", indexPlaceholder))
		return nil, false
	}
	if err := checkTagName(strings.ReplaceAll(name, indexPlaceholder, "0")); err != nil {
		*errs = append(*errs, keyErrorf(key, "%v", err))
		return nil, false
	}
	// parseEntry reports a count out of range; building names for it
	// could exhaust memory.
	if count < 1 || count > maxAddressEnd {
		return nil, false
	}
	names := make([]string, count)
	for i := range names {
		names[i] = strings.ReplaceAll(name, indexPlaceholder, strconv.Itoa(i))
	}
	return names, true
}

// checkTagName refuses names that other parts of Pith cannot carry: empty
// segments, Pith's own "pith." namespace, and characters that delimit fields
// in the CSV and line protocol inputs.
func checkTagName(name string) error {
	if name == "" {
		return errors.New("tag name is empty")
	}
	if name == "pith" || strings.HasPrefix(name, "pith.") {
		return fmt.Errorf("tag name %q is in the namespace reserved for Pith's own tags", name)
	}
	if strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") || strings.Contains(name, "..") {
		return fmt.Errorf("tag name %q has an empty dotted segment", name)
	}
	for _, r := range name {
		if unicode.IsSpace(r) || unicode.IsControl(r) || strings.ContainsRune(`,"'{}=\#`, r) {
			return fmt.Errorf("tag name %q contains %q", name, r)
		}
	}
	return nil
}

// expandedLen returns the number of values n entries expand into, counting
// out-of-range counts (which are errors) as one so that a bad file cannot
// make it allocate much.
func expandedLen(n int, count func(int) int) int {
	total := 0
	for j := 0; j < n; j++ {
		c := count(j)
		if c < 1 || c > maxAddressEnd {
			c = 1
		}
		total += c
	}
	return total
}

// expandTags is ExpandedTags with key paths starting at prefix.
func (c *ModbusClient) expandTags(prefix string) ([]ModbusTag, []error) {
	var errs []error
	tags := make([]ModbusTag, 0, expandedLen(len(c.Tags), func(j int) int { return c.Tags[j].Count }))
	for j, spec := range c.Tags {
		path := prefix + "[" + strconv.Itoa(j) + "]"
		e, ok := parseEntry(&errs, path, spec.Register, spec.Type, spec.Order, spec.Count, spec.Scale, spec.Offset)
		archive, err := parseArchive(spec.Archive)
		if err != nil {
			errs = append(errs, keyErrorf(path+".archive", "%v", err))
			ok = false
		}
		switch {
		case archive == ArchiveDeadband && e.typ == modbus.Bool:
			errs = append(errs, keyErrorf(path+".archive", "deadband does not apply to bool"))
			ok = false
		case archive == ArchiveDeadband && !(spec.Deadband > 0 && !math.IsInf(spec.Deadband, 0)):
			errs = append(errs, keyErrorf(path+".deadband", "must be a finite number > 0 with archive = \"deadband\""))
			ok = false
		case archive != ArchiveDeadband && spec.Deadband != 0:
			errs = append(errs, keyErrorf(path+".deadband", "needs archive = \"deadband\""))
			ok = false
		}
		names, nameOK := expandName(&errs, path+".name", spec.Name, spec.Count)
		if !ok || !nameOK {
			continue
		}
		for i, name := range names {
			tags = append(tags, ModbusTag{
				Name:        name,
				Area:        e.area,
				Address:     e.addr + uint16(i*e.width),
				Type:        e.typ,
				Order:       e.order,
				Scale:       spec.Scale,
				Offset:      spec.Offset,
				Unit:        spec.Unit,
				Description: spec.Description,
				Archive:     archive,
				Deadband:    spec.Deadband,
				Entry:       j,
				Index:       i,
			})
		}
	}
	return tags, errs
}

// expandRegisters is ExpandedRegisters with key paths starting at prefix. It
// also refuses entries whose addresses overlap, since a server cannot
// publish two values in one register.
func (s *ModbusServer) expandRegisters(prefix string) ([]ModbusRegister, []error) {
	var errs []error
	regs := make([]ModbusRegister, 0, expandedLen(len(s.Registers), func(j int) int { return s.Registers[j].Count }))
	for j, spec := range s.Registers {
		path := prefix + "[" + strconv.Itoa(j) + "]"
		e, ok := parseEntry(&errs, path, spec.Register, spec.Type, spec.Order, spec.Count, spec.Scale, spec.Offset)
		if spec.Writable && e.areaOK && !e.area.Writable() {
			errs = append(errs, keyErrorf(path+".writable", "%s registers are read-only in Modbus", e.area))
			ok = false
		}
		names, nameOK := expandName(&errs, path+".tag", spec.Tag, spec.Count)
		if !ok || !nameOK {
			continue
		}
		for i, name := range names {
			regs = append(regs, ModbusRegister{
				Tag:      name,
				Area:     e.area,
				Address:  e.addr + uint16(i*e.width),
				Type:     e.typ,
				Order:    e.order,
				Scale:    spec.Scale,
				Offset:   spec.Offset,
				Writable: spec.Writable,
				Entry:    j,
				Index:    i,
			})
		}
	}
	sort.SliceStable(regs, func(a, b int) bool {
		if ra, rb := areaRank(regs[a].Area), areaRank(regs[b].Area); ra != rb {
			return ra < rb
		}
		return regs[a].Address < regs[b].Address
	})
	// After sorting, a value overlaps an earlier one when it starts before
	// the furthest end reached so far. Each pair of entries is reported
	// once, on the later entry of the file: it is the one most likely just
	// added.
	type pair struct{ a, b int }
	reported := make(map[pair]bool)
	reach, widest := 0, -1
	for k, cur := range regs {
		if k > 0 && regs[k-1].Area != cur.Area {
			reach, widest = 0, -1
		}
		if widest >= 0 && int(cur.Address) < reach && regs[widest].Entry != cur.Entry {
			early, late := regs[widest], cur
			if early.Entry > late.Entry {
				early, late = late, early
			}
			if p := (pair{early.Entry, late.Entry}); !reported[p] {
				reported[p] = true
				errs = append(errs, keyErrorf(fmt.Sprintf("%s[%d].register", prefix, late.Entry),
					"%s:%d (%s) overlaps %s[%d] at %s:%d (%s)", late.Area, late.Address, late.Type,
					prefix, early.Entry, early.Area, early.Address, early.Type))
			}
		}
		if end := int(cur.Address) + int(cur.Type.Registers()); end > reach {
			reach, widest = end, k
		}
	}
	return regs, errs
}
