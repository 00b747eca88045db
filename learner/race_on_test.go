//go:build race

package learner

const raceEnabled = true
