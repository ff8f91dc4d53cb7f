package opcua

import (
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/model"
)

// TestTextStaleRead applies the text values of a link cut in the order a
// race can give them: the read loop's read, taken before the cut, lands
// after markBad turned the tag bad; then the refresh after the recovery
// reads the unchanged text again. The stale read is older than the bad
// mark, so the table keeps the bad value; the station must not remember
// it as stored, or the refresh's equal value is skipped and the tag stays
// bad for as long as its text does not change.
func TestTextStaleRead(t *testing.T) {
	c := stationConfig(t, "opc.tcp://127.0.0.1:1/pith", 0)
	textTag(&c, "s.hello", "ns=1;s=text", func(ts *config.OPCUATagSpec) { ts.Mode = config.OPCUAModeRead })
	st, tab, rec := newStation(t, c)
	ctx := t.Context()
	source := time.Now().Add(-time.Hour).UnixMilli() // the server set the text an hour ago
	st.writeTexts(ctx, []textSample{{tag: 0, t: source, text: "hello", q: model.QualityGood}})
	st.markBad()
	floor := st.badAt.Load()
	st.writeTexts(ctx, []textSample{{tag: 0, t: source, text: "hello", q: model.QualityGood}}) // the stale read
	if v := latest(tab, "s.hello"); v.Q != model.QualityBad {
		t.Fatalf("after the stale read: %+v, want bad", v)
	}
	st.writeTexts(ctx, []textSample{{tag: 0, t: floor, text: "hello", q: model.QualityGood}}) // the refresh
	if v := latest(tab, "s.hello"); v.Q != model.QualityGood || v.Text != "hello" {
		t.Fatalf("after the refresh: %+v, want good hello", v)
	}
	if hs := rec.textsOf("s.hello"); len(hs) != 3 || hs[1].Q != model.QualityBad || hs[2].T != floor {
		t.Fatalf("stored %+v, want good, bad, good at %d", hs, floor)
	}
}
