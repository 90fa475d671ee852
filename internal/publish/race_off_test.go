//go:build !race

package publish

// race reports whether the race detector is on; allocation counts are not
// pinned under it, since it adds allocations of its own.
const race = false
