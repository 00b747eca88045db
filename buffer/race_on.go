//go:build race

package buffer

const race = true
