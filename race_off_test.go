//go:build !race

package lambdaadapter_test

const raceEnabled = false
