// Package bench is the `pith bench` harness: it measures a Pith build from
// outside, the way an operator sizing a machine would, and never runs
// inside `pith serve`. RunAll runs the six experiments of docs/bench.md
// (acquisition over loopback Modbus, FREEZE and the archive pipeline, the
// store on the standard datasets through a child `pith serve`, HTTP
// ingest, scheduling latency) and returns a Report that sets each figure
// beside its reference figure. RunStore and RunLatency are
// `pith bench store` and `pith bench latency` on their own.
//
// It imports internal/diag (FREEZE, the process CPU clock) and the parts
// it drives; nothing in the service imports it.
package bench
