package config

import (
	"errors"
	"maps"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
)

var durationType = reflect.TypeOf(Duration(0))

// checkTree walks the generic decoding of a file alongside the Config type and
// reports, with indexed key paths, every key Config does not have, every
// value of the wrong TOML type and every malformed duration. All problems are
// reported at once (sorted by key) so that a user fixes a file in one pass.
func checkTree(tree map[string]any) error {
	var errs []error
	checkValue(&errs, "", reflect.TypeOf(Config{}), tree)
	return errors.Join(errs...)
}

// checkValue checks the generic value v found at key path against type t.
func checkValue(errs *[]error, path string, t reflect.Type, v any) {
	if t == durationType {
		s, ok := v.(string)
		if !ok {
			*errs = append(*errs, keyErrorf(path, "expected a duration string such as \"1s\", got %s", tomlTypeName(v)))
			return
		}
		if _, err := time.ParseDuration(s); err != nil {
			*errs = append(*errs, keyErrorf(path, "invalid duration %q (use a number and a unit: ms, s, m, h)", s))
		}
		return
	}
	mismatch := func(want string) {
		*errs = append(*errs, keyErrorf(path, "expected %s, got %s", want, tomlTypeName(v)))
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			mismatch("a table")
			return
		}
		fields := tomlFields(t)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			sub := joinKey(path, k)
			f, ok := fields[k]
			if !ok {
				*errs = append(*errs, keyErrorf(sub, "unknown key"))
				continue
			}
			checkValue(errs, sub, f.Type, m[k])
		}
	case reflect.Slice:
		rv := reflect.ValueOf(v)
		if _, ok := v.(map[string]any); ok && t.Elem().Kind() == reflect.Struct {
			*errs = append(*errs, keyErrorf(path, "expected an array of tables: write [[%s]], not [%s]", stripIndexes(path), stripIndexes(path)))
			return
		}
		if v == nil || rv.Kind() != reflect.Slice {
			mismatch("an array")
			return
		}
		for i := 0; i < rv.Len(); i++ {
			checkValue(errs, path+"["+strconv.Itoa(i)+"]", t.Elem(), rv.Index(i).Interface())
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			mismatch("a string")
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			mismatch("a boolean")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(int64)
		if !ok {
			mismatch("an integer")
			return
		}
		// int is 32 bits on armv7, one of our targets.
		if reflect.Zero(t).OverflowInt(n) {
			*errs = append(*errs, keyErrorf(path, "integer %d out of range", n))
		}
	case reflect.Float32, reflect.Float64:
		switch n := v.(type) {
		case float64:
		case int64:
			// The decoder refuses integers a float64 cannot hold exactly.
			if n > 1<<53 || n < -(1<<53) {
				*errs = append(*errs, keyErrorf(path, "integer %d too large for a float; write it as a float", n))
			}
		default:
			mismatch("a number")
		}
	default:
		// A field kind the schema does not use; the decoder will judge it.
	}
}

// tomlFields maps the TOML key of each exported field of struct type t to the
// field.
func tomlFields(t reflect.Type) map[string]reflect.StructField {
	fields := make(map[string]reflect.StructField, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			// An embedded struct's keys are the outer table's, as the
			// decoder reads them.
			maps.Copy(fields, tomlFields(f.Type))
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = f
	}
	return fields
}

// joinKey appends key to path, quoting it as TOML does when it is not a bare
// key.
func joinKey(path, key string) string {
	if !isBareKey(key) {
		key = strconv.Quote(key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func isBareKey(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range k {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// tomlTypeName names the TOML type of a generically decoded value.
func tomlTypeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case map[string]any:
		return "a table"
	case []map[string]any, []any:
		return "an array"
	case time.Time:
		return "a datetime"
	default:
		return "a " + reflect.TypeOf(v).String()
	}
}

// subTable returns the table at key in m, or nil.
func subTable(m map[string]any, key string) map[string]any {
	sub, _ := m[key].(map[string]any)
	return sub
}

// tables returns the tables of the array at key in m; elements that are not
// tables (which checkTree refuses) are returned as nil.
func tables(m map[string]any, key string) []map[string]any {
	switch a := m[key].(type) {
	case []map[string]any:
		return a
	case []any:
		out := make([]map[string]any, len(a))
		for i, e := range a {
			out[i], _ = e.(map[string]any)
		}
		return out
	}
	return nil
}

// has reports whether key is present in table m.
func has(m map[string]any, key string) bool {
	_, ok := m[key]
	return ok
}

// stripIndexes removes the array indexes of a key path, giving the header a
// user writes: "modbus.client[0].tags" becomes "modbus.client.tags".
func stripIndexes(path string) string {
	var b strings.Builder
	depth := 0
	for _, r := range path {
		switch {
		case r == '[':
			depth++
		case r == ']':
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	return b.String()
}
