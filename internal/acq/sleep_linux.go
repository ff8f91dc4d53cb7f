//go:build linux

package acq

import (
	"context"
	"time"

	"golang.org/x/sys/unix"
)

// preciseSleep is true where sleepAbs waits in the kernel.
const preciseSleep = true

// sleepAbs sleeps until the wall clock reads t with clock_nanosleep on an
// absolute deadline: the kernel wakes the thread within tens of
// microseconds (cyclictest's figures), where the Go runtime's timers wake
// up to a millisecond late. Fast stations lock their goroutine to its
// thread so that the wake-up is not handed to another one.
func sleepAbs(ctx context.Context, t time.Time) error {
	ts := unix.NsecToTimespec(t.UnixNano())
	for {
		err := unix.ClockNanosleep(unix.CLOCK_REALTIME, unix.TIMER_ABSTIME, &ts, nil)
		if err != unix.EINTR {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return ctx.Err()
}
