package alarm

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"
)

// TestLimitAlarmMatchesModel drives a hi alarm with random samples, limit,
// deadband and delays, ticking every millisecond, and compares its state
// each millisecond with a naive model that walks the same milliseconds:
// the alarm flips once the condition (judged with the deadband of the
// current state) has differed from the state for the whole delay.
func TestLimitAlarmMatchesModel(t *testing.T) {
	var events uint64
	for seed := uint64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewPCG(seed, 99))
		lim := 50.0
		db := float64(rng.IntN(11))
		on := time.Duration(rng.IntN(40)) * time.Millisecond
		off := time.Duration(rng.IntN(40)) * time.Millisecond
		def := Def{Name: "a", Kind: KindHi, Tag: "x.v", Limit: lim, Deadband: db, OnDelay: on, OffDelay: off}
		r := newRig(t, "", def)

		samples := map[int64]float64{}
		for ms := int64(0); ms < 1500; ms += 1 + int64(rng.IntN(30)) {
			samples[ms] = float64(30 + rng.IntN(41))
		}
		// The model.
		active, has := false, false
		var v float64
		var pendingSince int64 = -1
		for ms := int64(0); ms < 1500; ms++ {
			if s, ok := samples[ms]; ok {
				v, has = s, true
				r.set("x.v", ms, s, model.QualityGood)
			} else {
				r.at(ms)
			}
			if has {
				cond := v > lim
				if active {
					cond = v > lim-db
				}
				switch {
				case cond == active:
					pendingSince = -1
				default:
					if pendingSince < 0 {
						pendingSince = ms
					}
					delay := on
					if active {
						delay = off
					}
					if time.Duration(ms-pendingSince)*time.Millisecond >= delay {
						active, pendingSince = !active, -1
					}
				}
			}
			got := r.state("a")
			if gotActive := got == "active"; gotActive != active {
				t.Fatalf("seed %d (deadband %v, on %v, off %v) at %d ms (value %v): engine %s, model active=%v",
					seed, db, on, off, ms, v, got, active)
			}
		}
		events += r.e.Stats().Events
	}
	if events < 200 {
		t.Fatalf("only %d transitions over all seeds: the model test exercises too little", events)
	}
	t.Logf("%d transitions checked", events)
}
