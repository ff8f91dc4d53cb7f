package main

import (
	"fmt"

	"github.com/pith-historian/pith/internal/dashboard"
)

func ptr[T any](v T) *T { return &v }

// demoDashboards are what `pith demo` ships: the plant, a house energy
// view and a public display (opened by /display).
func demoDashboards() []*dashboard.Dashboard {
	return []*dashboard.Dashboard{
		{ID: "plant", Title: "Demo plant", Range: "1h", Widgets: []dashboard.Widget{
			{ID: "second", Type: "value", X: 0, Y: 0, W: 3, H: 2, Title: "Second of the minute", Tags: []string{"demo.calc.second"}, Unit: "s", Decimals: ptr(0)},
			{ID: "valve", Type: "gauge", X: 3, Y: 0, W: 3, H: 2, Title: "Valve", Tags: []string{"demo.valve.position"}, Unit: "%", Min: ptr(0.0), Max: ptr(100.0), High: ptr(90.0)},
			{ID: "late", Type: "lamp", X: 6, Y: 0, W: 3, H: 2, Title: "Pattern late", Tags: []string{"demo.plc.r0"}, High: ptr(49999.0)},
			{ID: "setpoint", Type: "setpoint", X: 9, Y: 0, W: 3, H: 2, Title: "Valve setpoint", Tags: []string{"demo.valve.position"}, Unit: "%", Step: ptr(5.0), Min: ptr(0.0), Max: ptr(100.0)},
			{ID: "trend", Type: "trend", X: 0, Y: 2, W: 8, H: 4, Title: "Pattern", Tags: []string{"demo.plc.r0", "demo.plc.r1"}, Range: "15m"},
			{ID: "table", Type: "table", X: 8, Y: 2, W: 4, H: 4, Title: "Registers", Tags: []string{"demo.plc.r0", "demo.plc.r1", "demo.plc.r2", "demo.fast.r0", "demo.valve.position"}},
			{ID: "about", Type: "text", X: 0, Y: 6, W: 12, H: 2, Text: "## The demo plant\nA simulated SCADA writes the pattern into Pith's own Modbus server; three stations poll it back."},
		}},
		{ID: "house", Title: "House energy", Range: "7d", Widgets: []dashboard.Widget{
			{ID: "use", Type: "value", X: 0, Y: 0, W: 4, H: 2, Title: "Use", Tags: []string{"demo.house.power"}, Unit: "W", Decimals: ptr(0)},
			{ID: "pv", Type: "value", X: 4, Y: 0, W: 4, H: 2, Title: "Solar", Tags: []string{"demo.house.pv"}, Unit: "W", Decimals: ptr(0)},
			{ID: "grid", Type: "value", X: 8, Y: 0, W: 4, H: 2, Title: "Grid", Tags: []string{"demo.house.grid"}, Unit: "W", Decimals: ptr(0)},
			{ID: "kwh", Type: "energy", X: 0, Y: 2, W: 8, H: 5, Title: "kWh per day", Tags: []string{"demo.house.power"}, Bucket: "day", Tariff: "demo"},
			{ID: "solar", Type: "energy", View: "solar", X: 8, Y: 2, W: 4, H: 5, Title: "Solar and house", Tags: []string{"demo.house.pv", "demo.house.power"}, Range: "1d"},
			{ID: "power", Type: "multigraph", X: 0, Y: 7, W: 8, H: 4, Title: "Power", Tags: []string{"demo.house.power", "demo.house.pv"}, Range: "1h"},
			{ID: "hist", Type: "histogram", X: 8, Y: 7, W: 4, H: 4, Title: "Time at each load", Tags: []string{"demo.house.power"}, Range: "1d", Bins: 8},
		}},
		{ID: "display", Title: "Visitor display", Public: true, Display: true, Range: "1h", Widgets: []dashboard.Widget{
			{ID: "pv", Type: "value", X: 0, Y: 0, W: 6, H: 3, Title: "Solar now", Tags: []string{"demo.house.pv"}, Unit: "W", Decimals: ptr(0)},
			{ID: "use", Type: "value", X: 6, Y: 0, W: 6, H: 3, Title: "House now", Tags: []string{"demo.house.power"}, Unit: "W", Decimals: ptr(0)},
			{ID: "trend", Type: "trend", X: 0, Y: 3, W: 12, H: 4, Title: "The last hour", Tags: []string{"demo.house.pv", "demo.house.power"}, Range: "1h"},
		}},
	}
}

// seedDemoDashboards writes the demo's dashboards into a data directory
// that has none yet (a reused demo directory keeps the user's edits).
func seedDemoDashboards(dir string) error {
	st, err := dashboard.Open(dir)
	if err != nil {
		return err
	}
	if len(st.List()) > 0 {
		return nil
	}
	for _, d := range demoDashboards() {
		if _, err := st.Create(d, false); err != nil {
			return fmt.Errorf("create demo dashboard %s: %w", d.ID, err)
		}
	}
	return nil
}
