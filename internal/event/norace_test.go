//go:build !race

package event

// raceEnabled reports whether the race detector is on; allocation counts are
// not pinned under it.
const raceEnabled = false
