package ingest

import (
	"fmt"
	"strings"
	"testing"
	"unsafe"
)

// TestLPRowsShareFinalPools checks that, however much the pools grew while
// a body was parsed, in one call or several and past a refused line, every
// row's tags and fields are slices of the pools' final arrays (rows left
// pointing into an outgrown array keep it alive: four times the memory)
// and still hold what their line says.
func TestLPRowsShareFinalPools(t *testing.T) {
	var b strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&b, "m%d", i%7)
		for k := range i % 4 {
			fmt.Fprintf(&b, ",t%d=v%d", k, i)
		}
		b.WriteByte(' ')
		for k := range 1 + i%3 {
			if k > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "f%d=%d", k, i*10+k)
		}
		fmt.Fprintf(&b, " %d\n", i)
	}
	body := b.String()
	half := strings.Index(body[len(body)/2:], "\n") + len(body)/2 + 1
	var rs LPRows
	if err := rs.Unmarshal([]byte(body[:half])); err != nil {
		t.Fatal(err)
	}
	// A refused line (its tags are parsed before its bad field) leaves
	// nothing in the pools.
	if err := rs.Unmarshal([]byte("bad,t0=x,t1=y f0=1,f1=\n")); err == nil {
		t.Fatal("bad line accepted")
	}
	if err := rs.Unmarshal([]byte(body[half:])); err != nil {
		t.Fatal(err)
	}
	if len(rs.Rows) != 5000 {
		t.Fatalf("%d rows, want 5000", len(rs.Rows))
	}
	within := func(p, arr unsafe.Pointer, size, n uintptr) bool {
		return uintptr(p) >= uintptr(arr) && uintptr(p) < uintptr(arr)+size*n
	}
	for i, r := range rs.Rows {
		if len(r.Tags) != i%4 || len(r.Fields) != 1+i%3 {
			t.Fatalf("row %d: %d tags, %d fields", i, len(r.Tags), len(r.Fields))
		}
		for k, tg := range r.Tags {
			if string(tg.Key) != fmt.Sprint("t", k) || string(tg.Value) != fmt.Sprint("v", i) {
				t.Fatalf("row %d tag %d: %s=%s", i, k, tg.Key, tg.Value)
			}
		}
		for k, f := range r.Fields {
			if string(f.Key) != fmt.Sprint("f", k) || f.Value != float64(i*10+k) {
				t.Fatalf("row %d field %d: %s=%v", i, k, f.Key, f.Value)
			}
		}
		if len(r.Tags) > 0 && !within(unsafe.Pointer(&r.Tags[0]), unsafe.Pointer(unsafe.SliceData(rs.tagsPool)), unsafe.Sizeof(LPTag{}), uintptr(cap(rs.tagsPool))) {
			t.Fatalf("row %d: tags outside the final tag pool", i)
		}
		if !within(unsafe.Pointer(&r.Fields[0]), unsafe.Pointer(unsafe.SliceData(rs.fieldsPool)), unsafe.Sizeof(LPField{}), uintptr(cap(rs.fieldsPool))) {
			t.Fatalf("row %d: fields outside the final field pool", i)
		}
	}
}
