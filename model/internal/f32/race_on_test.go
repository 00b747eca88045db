//go:build race

package f32

const raceEnabled = true
