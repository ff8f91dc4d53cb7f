package config

import (
	"fmt"
	"math"
	"strings"
	"time"
	// The IANA time-zone database, embedded (about 450 kB) so that
	// kwh_per_day's tz works on a box without /usr/share/zoneinfo (a
	// static binary on a minimal image).
	_ "time/tzdata"
)

// Input is one [[input]]: an ordered chain of processes run on every
// sample of one input tag (the emoncms input-processing idea). The chain
// carries a value from step to step; steps that write a tag pass the value
// on unchanged.
type Input struct {
	// Tag is the input tag, as acquired or posted (emoncms: node.key).
	Tag string `toml:"tag"`
	// Process lists the steps, run in order.
	Process []ProcessStep `toml:"process"`
}

// ProcessStep is one step of an input's chain, written as an inline table
// with exactly one action key (scale, offset, allow_positive,
// allow_negative, power_to_kwh, kwh_to_power, pulse_to_rate, kwh_per_day,
// log) plus that action's options (max_gap, wrap, per, tz). The action
// fields are pointers so that "scale = 0" is told apart from "no scale".
type ProcessStep struct {
	// Scale multiplies the value.
	Scale *float64 `toml:"scale"`
	// Offset adds to the value.
	Offset *float64 `toml:"offset"`
	// AllowPositive (true) turns negative values into 0.
	AllowPositive *bool `toml:"allow_positive"`
	// AllowNegative (true) turns positive values into 0.
	AllowNegative *bool `toml:"allow_negative"`
	// PowerToKWh names the tag receiving the running energy total: the
	// value (kW) integrated over time in hours (trapezoid rule).
	PowerToKWh *string `toml:"power_to_kwh"`
	// KWhToPower names the tag receiving the power (kW) derived from a
	// cumulative kWh value.
	KWhToPower *string `toml:"kwh_to_power"`
	// PulseToRate names the tag receiving the rate of a pulse counter,
	// in counts per Per.
	PulseToRate *string `toml:"pulse_to_rate"`
	// KWhPerDay names the tag receiving the energy (kWh) of each local
	// day, integrating the value (kW); one point per day, at local
	// midnight.
	KWhPerDay *string `toml:"kwh_per_day"`
	// Log names a tag receiving the value as it is at this step.
	Log *string `toml:"log"`
	// MaxGap (power_to_kwh, kwh_per_day): intervals between samples longer
	// than this are not integrated; "0s" integrates every interval.
	MaxGap Duration `toml:"max_gap"`
	// Wrap (pulse_to_rate) is the counter's modulus (65536 for a 16-bit
	// counter): a decrease is taken as a wrap. 0 takes a decrease as a
	// reset, which yields no rate for that interval.
	Wrap float64 `toml:"wrap"`
	// Per (pulse_to_rate) is the rate's time unit; default "1s".
	Per Duration `toml:"per"`
	// TZ (kwh_per_day) is the IANA time zone whose local days are summed,
	// for example "Europe/London"; default "UTC".
	TZ string `toml:"tz"`
}

// Action returns the step's action key, or "" when none is set, and how
// many action keys are set.
func (s *ProcessStep) Action() (string, int) {
	var name string
	n := 0
	set := func(ok bool, key string) {
		if ok {
			n++
			if name == "" {
				name = key
			}
		}
	}
	set(s.Scale != nil, "scale")
	set(s.Offset != nil, "offset")
	set(s.AllowPositive != nil, "allow_positive")
	set(s.AllowNegative != nil, "allow_negative")
	set(s.PowerToKWh != nil, "power_to_kwh")
	set(s.KWhToPower != nil, "kwh_to_power")
	set(s.PulseToRate != nil, "pulse_to_rate")
	set(s.KWhPerDay != nil, "kwh_per_day")
	set(s.Log != nil, "log")
	return name, n
}

// OutputTag returns the tag a step writes, or "".
func (s *ProcessStep) OutputTag() string {
	for _, p := range []*string{s.PowerToKWh, s.KWhToPower, s.PulseToRate, s.KWhPerDay, s.Log} {
		if p != nil {
			return *p
		}
	}
	return ""
}

// Calc is one [[calc]]: a calculated tag, an expression over other tags.
type Calc struct {
	// Tag is the calculated tag's name.
	Tag string `toml:"tag"`
	// Expr is the expression (expr-lang syntax); tag names, dotted ones
	// included, are its variables.
	Expr string `toml:"expr"`
	// Period evaluates the expression every period (aligned to the
	// clock); "0s" evaluates it whenever one of its inputs changes.
	Period Duration `toml:"period"`
	// Unit and Description are the tag's metadata.
	Unit        string `toml:"unit"`
	Description string `toml:"description"`
}

// maxProcessSteps bounds one chain: a longer one is a configuration
// mistake, not a plant.
const maxProcessSteps = 64

// validateProcess checks [[input]] and [[calc]]; the expressions
// themselves are compiled (and cycles found) by internal/process when the
// plant starts, since config imports no expression engine.
func (c *Config) validateProcess(add func(key, format string, args ...any)) {
	inputs := make(map[string]int)
	outputs := make(map[string]string)
	claim := func(tag, key string) {
		if prev, ok := outputs[tag]; ok {
			add(key, "tag %q is already written by %s", tag, prev)
			return
		}
		outputs[tag] = key
	}
	for i, in := range c.Input {
		key := fmt.Sprintf("input[%d]", i)
		if err := checkTagName(in.Tag); err != nil {
			add(key+".tag", "%v", err)
		}
		if j, ok := inputs[in.Tag]; ok {
			add(key+".tag", "tag %q already has a chain in input[%d]", in.Tag, j)
		}
		inputs[in.Tag] = i
		if len(in.Process) == 0 || len(in.Process) > maxProcessSteps {
			add(key+".process", "want 1 to %d steps, have %d", maxProcessSteps, len(in.Process))
		}
		for j := range in.Process {
			s := &in.Process[j]
			sk := fmt.Sprintf("%s.process[%d]", key, j)
			name, n := s.Action()
			if n != 1 {
				add(sk, "want exactly one of scale, offset, allow_positive, allow_negative, power_to_kwh, kwh_to_power, pulse_to_rate, kwh_per_day, log; have %d", n)
				continue
			}
			switch name {
			case "scale":
				checkFinite(add, sk+".scale", *s.Scale)
			case "offset":
				checkFinite(add, sk+".offset", *s.Offset)
			case "allow_positive", "allow_negative":
				if b := s.AllowPositive; b != nil && !*b || s.AllowNegative != nil && !*s.AllowNegative {
					add(sk+"."+name, "only true is meaningful; remove the step instead")
				}
			}
			if out := s.OutputTag(); name != "scale" && name != "offset" && name != "allow_positive" && name != "allow_negative" {
				if err := checkTagName(out); err != nil {
					add(sk+"."+name, "%v", err)
				} else if out == in.Tag {
					add(sk+"."+name, "writes its own input tag %q", out)
				} else {
					claim(out, sk+"."+name)
				}
			}
			if s.MaxGap != 0 && name != "power_to_kwh" && name != "kwh_per_day" {
				add(sk+".max_gap", "only for power_to_kwh and kwh_per_day")
			}
			if s.MaxGap < 0 {
				add(sk+".max_gap", "must not be negative")
			}
			if (s.Wrap != 0 || s.Per != 0) && name != "pulse_to_rate" {
				add(sk, "wrap and per are only for pulse_to_rate")
			}
			if !(s.Wrap >= 0) || s.Wrap > 1<<53 {
				add(sk+".wrap", "want 0 to 2^53")
			}
			if s.Per < 0 || name == "pulse_to_rate" && s.Per != 0 && s.Per < Duration(time.Millisecond) {
				add(sk+".per", "want at least 1ms")
			}
			if s.TZ != "" {
				if name != "kwh_per_day" {
					add(sk+".tz", "only for kwh_per_day")
				} else if _, err := time.LoadLocation(s.TZ); err != nil {
					add(sk+".tz", "unknown time zone %q", s.TZ)
				}
			}
		}
	}
	for i, cc := range c.Calc {
		key := fmt.Sprintf("calc[%d]", i)
		if err := checkTagName(cc.Tag); err != nil {
			add(key+".tag", "%v", err)
		} else {
			claim(cc.Tag, key+".tag")
		}
		if strings.TrimSpace(cc.Expr) == "" {
			add(key+".expr", "empty expression")
		}
		if cc.Period < 0 || cc.Period > 0 && cc.Period < Duration(10*time.Millisecond) {
			add(key+".period", "want \"0s\" (on change) or at least 10ms")
		}
	}
}

func checkFinite(add func(key, format string, args ...any), key string, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		add(key, "must be a finite number")
	}
}
