//go:build !race

package buffer

const race = false
