//go:build !linux

package acq

import (
	"context"
	"time"
)

const preciseSleep = false

func sleepAbs(ctx context.Context, t time.Time) error { return ctx.Err() }
