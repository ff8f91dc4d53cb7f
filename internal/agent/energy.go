package agent

import (
	"fmt"
	"log/slog"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/energy"
	"github.com/pith-historian/pith/internal/store"
)

// mountEnergy serves the energy, histogram and report endpoints from the
// store, in the zone and with the tariffs of [energy].
func mountEnergy(mux *routeMux, cfg *config.Config, db *store.DB, meta api.MetaFunc, log *slog.Logger) error {
	loc, err := cfg.EnergyLocation()
	if err != nil {
		return fmt.Errorf("energy time zone: %w", err)
	}
	tariffs, err := tariffsOf(cfg.Energy)
	if err != nil {
		return err
	}
	unit := func(tag string) string {
		if meta == nil {
			return ""
		}
		m, _ := meta(tag)
		return m.Unit
	}
	h := energy.NewHandler(energy.Options{Queries: db, Location: loc, Tariffs: tariffs, Unit: unit, Log: log})
	for _, p := range energy.Paths {
		mux.Handle(p, h)
	}
	return nil
}

// tariffsOf converts the configured tariffs (already validated).
func tariffsOf(e config.Energy) ([]*energy.Tariff, error) {
	var out []*energy.Tariff
	for i, t := range e.Tariff {
		tr := &energy.Tariff{Name: t.Name, Currency: t.Currency, Price: t.Price, StandingCharge: t.StandingCharge, ExportPrice: t.ExportPrice}
		for j, b := range t.Band {
			from, err1 := config.BandMinutes(b.From)
			to, err2 := config.BandMinutes(b.To)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("energy.tariff[%d].band[%d]: bad from or to", i, j)
			}
			bd := energy.Band{From: from, To: to, Price: b.Price}
			for _, d := range b.Days {
				wd, _ := config.Weekday(d)
				bd.Days = append(bd.Days, wd)
			}
			tr.Bands = append(tr.Bands, bd)
		}
		if err := tr.Check(); err != nil {
			return nil, fmt.Errorf("energy.tariff[%d]: %w", i, err)
		}
		out = append(out, tr)
	}
	return out, nil
}
