//go:build race

package lambdaadapter_test

const raceEnabled = true
