//go:build race

package getrecords

// raceEnabled reports whether the race detector is on; allocation counts are
// not pinned under it.
const raceEnabled = true
