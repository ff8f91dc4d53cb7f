package model

import (
	"errors"
	"strings"
	"testing"
)

func TestLabelsFrom(t *testing.T) {
	ls := LabelsFrom("job", "pith", "__name__", "up", "job", "node")
	if got, want := ls.String(), `{__name__="up", job="node"}`; got != want {
		t.Fatalf("LabelsFrom = %s, want %s", got, want)
	}
	if ls.Get("job") != "node" || ls.Get("none") != "" {
		t.Fatalf("Get: %v", ls)
	}
	if LabelsFrom() != nil {
		t.Fatal("no pairs must be nil labels")
	}
}

func TestLabelsCheck(t *testing.T) {
	long := strings.Repeat("x", MaxLabelValueBytes+1)
	many := make(Labels, MaxLabels+1)
	for i := range many {
		many[i] = Label{Name: string(rune('A'+i/26)) + string(rune('a'+i%26)), Value: "v"}
	}
	for _, c := range []struct {
		name string
		ls   Labels
		ok   bool
	}{
		{"nil", nil, true},
		{"sorted", LabelsFrom("a", "1", "b", ""), true},
		{"unsorted", Labels{{"b", "1"}, {"a", "1"}}, false},
		{"repeated", Labels{{"a", "1"}, {"a", "2"}}, false},
		{"empty name", Labels{{"", "1"}}, false},
		{"control", Labels{{"a\n", "1"}}, false},
		{"long value", Labels{{"a", long}}, false},
		{"bad utf8", Labels{{"a", "\xff"}}, false},
		{"too many", many.Sorted(), false},
	} {
		err := c.ls.Check()
		if (err == nil) != c.ok {
			t.Errorf("%s: Check() = %v, want ok %v", c.name, err, c.ok)
		}
		if err != nil && !errors.Is(err, ErrLabels) {
			t.Errorf("%s: error %v does not wrap ErrLabels", c.name, err)
		}
	}
}
