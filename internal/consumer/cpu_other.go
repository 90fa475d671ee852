//go:build !unix

package consumer

import "time"

// processCPU reports the process's CPU time as unknown where getrusage does
// not exist: the worker then publishes no utilization and counts as
// average when leases are assigned by load.
func processCPU() (time.Duration, bool) { return 0, false }
