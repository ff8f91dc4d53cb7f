package sparkplug

import (
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of PropertySet and PropertyValue (docs/format/sparkplug.md).
const (
	fPropKeys        = 1
	fPropValues      = 2
	fPropValueString = 8
)

// unitKeys are the property names read as a metric's engineering unit,
// compared without case: "engUnit" is the one Ignition and the Tahu
// examples write; "engUnits", "unit" and "units" are seen too.
var unitKeys = [...]string{"engunit", "engunits", "unit", "units"}

// Unit returns the engineering unit a metric's property set declares (a
// String property named as in unitKeys), and false when it declares none
// or the set cannot be read. It never panics: properties come from the
// network.
func (m *Metric) Unit() (string, bool) {
	if len(m.Properties) == 0 {
		return "", false
	}
	var keys []string
	var vals [][]byte
	b := m.Properties
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", false
		}
		b = b[n:]
		if (num == fPropKeys || num == fPropValues) && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return "", false
			}
			b = b[n:]
			if num == fPropKeys {
				keys = append(keys, string(v))
			} else {
				vals = append(vals, v)
			}
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return "", false
		}
		b = b[n:]
	}
	for i, k := range keys {
		if i >= len(vals) || !isUnitKey(k) {
			continue
		}
		if s, ok := propertyString(vals[i]); ok {
			return s, true
		}
	}
	return "", false
}

func isUnitKey(k string) bool {
	for _, u := range unitKeys {
		if strings.EqualFold(k, u) {
			return true
		}
	}
	return false
}

// propertyString returns a PropertyValue's string_value.
func propertyString(b []byte) (string, bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", false
		}
		b = b[n:]
		if num == fPropValueString && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return "", false
			}
			return string(v), true
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return "", false
		}
		b = b[n:]
	}
	return "", false
}

// AppendUnitProperty appends the PropertySet {"engUnit": unit} (a
// String property) to dst, for the metrics an edge node publishes.
func AppendUnitProperty(dst []byte, unit string) []byte {
	var val []byte
	val = protowire.AppendTag(val, 1, protowire.VarintType) // type
	val = protowire.AppendVarint(val, uint64(TypeString))
	val = protowire.AppendTag(val, fPropValueString, protowire.BytesType)
	val = protowire.AppendString(val, unit)
	dst = protowire.AppendTag(dst, fPropKeys, protowire.BytesType)
	dst = protowire.AppendString(dst, "engUnit")
	dst = protowire.AppendTag(dst, fPropValues, protowire.BytesType)
	return protowire.AppendBytes(dst, val)
}
