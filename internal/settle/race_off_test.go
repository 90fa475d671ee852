//go:build !race

package settle

// raceEnabled reports whether the race detector is on; allocation pins are
// skipped and the property test runs fewer schedules under it.
const raceEnabled = false
