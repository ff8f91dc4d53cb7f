package main

import (
	"fmt"

	"github.com/pith-historian/pith/internal/picture"
)

// demoPictureSVG is the demo plant drawn from the editor's symbols: a
// tank filled by the second of the minute, a pump and a motor that run in
// its second half, the valve that POST /api/v1/control sets, and the
// house's power on a sensor.
const demoPictureSVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 800 360">
<rect width="800" height="360" fill="#f4f4f4"/>
<text x="20" y="30" font-size="20">Demo plant</text>
<g id="pipe1" transform="translate(120,150)"><rect id="pipe1-body" width="560" height="12" fill="#888" stroke="#333"/></g>
<g id="tank1" transform="translate(40,80)">
<rect id="tank1-body" width="80" height="120" rx="8" fill="#e8eef5" stroke="#333" stroke-width="2"/>
<rect id="tank1-level" x="4" y="4" width="72" height="112" rx="4" fill="#4a90d9"/>
<text id="tank1-value" x="40" y="140" text-anchor="middle" font-size="14">—</text></g>
<g id="pump1" transform="translate(230,126)">
<circle id="pump1-body" cx="30" cy="30" r="28" fill="#bbb" stroke="#333" stroke-width="2"/>
<polygon points="18,14 48,30 18,46" fill="#fff" stroke="#333"/>
<text id="pump1-value" x="30" y="78" text-anchor="middle" font-size="14">running</text></g>
<g id="valve1" transform="translate(400,136)">
<polygon id="valve1-body" points="0,0 60,40 60,0 0,40" fill="#bbb" stroke="#333" stroke-width="2"/>
<text id="valve1-value" x="30" y="60" text-anchor="middle" font-size="14">—</text></g>
<g id="motor1" transform="translate(540,60)">
<rect id="motor1-body" width="70" height="50" rx="6" fill="#bbb" stroke="#333" stroke-width="2"/>
<g id="motor1-rotor"><circle cx="35" cy="25" r="16" fill="#fff" stroke="#333"/><line x1="35" y1="11" x2="35" y2="39" stroke="#333" stroke-width="3"/></g>
<text id="motor1-value" x="35" y="68" text-anchor="middle" font-size="14">motor</text></g>
<g id="sensor1" transform="translate(690,200)">
<circle id="sensor1-body" cx="20" cy="20" r="18" fill="#fff" stroke="#333" stroke-width="2"/>
<text x="20" y="25" text-anchor="middle" font-size="12">JT</text>
<text id="sensor1-value" x="20" y="58" text-anchor="middle" font-size="14">—</text></g>
</svg>`

// demoPictures are the process pictures `pith demo` ships.
func demoPictures() []*picture.Picture {
	grey, green := "#999999", "#2a9d2a"
	running := []picture.State{{From: -1e9, Color: grey, Label: "stopped"}, {From: 30, Color: green, Label: "running"}}
	return []*picture.Picture{{ID: "plant", Title: "Demo plant", SVG: demoPictureSVG, Bindings: []picture.Binding{
		{Element: "tank1-level", Tag: "demo.calc.second", Kind: "level", Min: ptr(0.0), Max: ptr(60.0)},
		{Element: "tank1-value", Tag: "demo.calc.second", Kind: "text", Unit: "s", Decimals: ptr(0)},
		{Element: "pump1-body", Tag: "demo.calc.second", Kind: "fill", States: running},
		{Element: "pump1-value", Tag: "demo.calc.second", Kind: "visible", Min: ptr(30.0)},
		{Element: "pipe1-body", Tag: "demo.calc.second", Kind: "fill", States: []picture.State{{From: -1e9, Color: "#888888"}, {From: 30, Color: "#4a90d9"}}},
		{Element: "valve1-body", Tag: "demo.valve.position", Kind: "fill", States: []picture.State{{From: -1e9, Color: grey, Label: "closed"}, {From: 1, Color: green, Label: "open"}}, Control: true},
		{Element: "valve1-value", Tag: "demo.valve.position", Kind: "text", Unit: "%", Decimals: ptr(1), Control: true},
		{Element: "motor1-rotor", Tag: "demo.calc.second", Kind: "rotate", Min: ptr(0.0), Max: ptr(60.0), Degrees: ptr(720.0)},
		{Element: "motor1-body", Tag: "demo.calc.second", Kind: "stroke", States: running},
		{Element: "sensor1-value", Tag: "demo.house.power", Kind: "text", Unit: "W", Decimals: ptr(0)},
	}}}
}

// seedDemoPictures writes the demo's pictures into a data directory that
// has none yet (a reused demo directory keeps the user's edits).
func seedDemoPictures(dir string) error {
	st, err := picture.Open(dir)
	if err != nil {
		return err
	}
	if len(st.List()) > 0 {
		return nil
	}
	for _, p := range demoPictures() {
		if _, err := st.Create(p, false); err != nil {
			return fmt.Errorf("create demo picture %s: %w", p.ID, err)
		}
	}
	return nil
}
