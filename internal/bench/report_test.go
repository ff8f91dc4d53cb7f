package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestReportNamesReferenceFigures checks that the report sets each figure
// beside its reference figure under that name, in markdown and in JSON.
func TestReportNamesReferenceFigures(t *testing.T) {
	rep := &Report{Host: "h", CPUs: 2, Quick: true}
	rep.add("2", "Modbus polls/s", 1234, "polls/s", "~130 polls/s (D2000, Pi 3)", "")
	var md bytes.Buffer
	rep.WriteMarkdown(&md)
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, text, want string
	}{
		{"markdown header", md.String(), "| reference (D2000, Raspberry Pi) / target |"},
		{"markdown row", md.String(), "| 1234 polls/s | ~130 polls/s (D2000, Pi 3) |"},
		{"json key", string(js), `"reference":"~130 polls/s (D2000, Pi 3)"`},
	}
	for _, tt := range tests {
		if !strings.Contains(tt.text, tt.want) {
			t.Errorf("%s: %q not in\n%s", tt.name, tt.want, tt.text)
		}
	}
	for _, text := range []string{md.String(), string(js)} {
		if strings.Contains(strings.ToLower(text), "seed") {
			t.Errorf("report still says seed:\n%s", text)
		}
	}
}
