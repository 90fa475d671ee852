//go:build !race

package emf_test

const raceEnabled = false
