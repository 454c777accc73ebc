package leasehold

import (
	"time"

	"golang.org/x/sys/unix"
)

// machineSuspended returns CLOCK_BOOTTIME minus CLOCK_MONOTONIC: both count
// from boot, and only the first counts suspended time. Both clocks are the
// kernel's, not testing/synctest's: inside a bubble the reading stays
// near its value outside.
func machineSuspended() time.Duration {
	var boot, mono unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &boot) != nil || unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono) != nil {
		return 0
	}
	return time.Duration(boot.Nano() - mono.Nano())
}
