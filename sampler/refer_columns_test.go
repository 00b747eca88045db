package sampler_test

import (
	"testing"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
)

func TestREFERColumnIndex(t *testing.T) {
	cfg := buffer.Config{Capacity: 64, ObsDim: 3, Action: buffer.Continuous, ActionDim: 2, Episode: true,
		Floats: append([]buffer.FloatColumn{{Name: "other", Width: 5}}, sampler.REFERColumns(2)...)}
	m, s, b, err := sampler.REFERColumnIndex(cfg)
	if err != nil || m != 1 || s != 2 || b != 3 {
		t.Fatalf("indices %d %d %d, err %v", m, s, b, err)
	}
	bad := cfg
	bad.Episode = false
	if _, _, _, err := sampler.REFERColumnIndex(bad); err == nil {
		t.Error("no episode columns accepted")
	}
	bad = cfg
	bad.Floats = sampler.REFERColumns(3)
	if _, _, _, err := sampler.REFERColumnIndex(bad); err == nil {
		t.Error("mean column of the wrong width accepted")
	}
	bad = cfg
	bad.Floats = sampler.REFERColumns(2)[:2]
	if _, _, _, err := sampler.REFERColumnIndex(bad); err == nil {
		t.Error("missing bootstrap column accepted")
	}
}
