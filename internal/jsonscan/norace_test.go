//go:build !race

package jsonscan

// raceEnabled reports whether the race detector is on; allocation counts are
// not pinned under it.
const raceEnabled = false
