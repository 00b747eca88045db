package actor

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/apexrl/apex/buffer"
)

// Projection codes a continuous observation as a vertex key for graph
// replay (TER, Hong et al. 2022): φ(s) = M·s with M a fixed d×dim(s)
// matrix of N(0, 1/d) entries, each coordinate rounded to 6 decimals, the
// rounded coordinates packed into one uint64 (the authors' code keys its
// graph by the rounded floats; d = 3). States closer than the rounding
// share a code, and distinct codes can collide (a 64-bit mix of the
// integers), rarely: environments with a discrete state should use their
// exact envs.StateHasher instead.
//
// M depends only on the seed and dim(s), so every actor of a run, built
// with the same ProjectionSeed, keys the same state the same way. A
// Projection is read-only after NewProjection and safe to share.
type Projection struct {
	m   [][]float64 // d rows of dim(s)
	dim int
}

// ProjectionDim and ProjectionSeed are the default d and the fixed seed of
// M that actors use.
const (
	ProjectionDim  = 3
	ProjectionSeed = 0x7e5_3a1d
)

// NewProjection returns the projection of obsDim-wide observations onto d
// coordinates drawn from seed. O(d·obsDim). obsDim must be in
// [1, buffer.MaxWidth] and d in [1, 64] (the coordinates share one
// uint64); anything else is an error wrapping ErrConfig.
func NewProjection(obsDim, d int, seed uint64) (*Projection, error) {
	if obsDim < 1 || obsDim > buffer.MaxWidth {
		return nil, fmt.Errorf("%w: NewProjection: obsDim must be in [1, %d], got %d", ErrConfig, buffer.MaxWidth, obsDim)
	}
	if d < 1 || d > 64 {
		return nil, fmt.Errorf("%w: NewProjection: d must be in [1, 64], got %d", ErrConfig, d)
	}
	rng := rand.New(rand.NewPCG(seed, uint64(obsDim)))
	p := &Projection{m: make([][]float64, d), dim: obsDim}
	sd := 1 / math.Sqrt(float64(d))
	for i := range p.m {
		p.m[i] = make([]float64, obsDim)
		for j := range p.m[i] {
			p.m[i][j] = rng.NormFloat64() * sd
		}
	}
	return p, nil
}

// Code returns φ(obs) packed into a uint64. It panics if len(obs) is not
// the projection's width. O(d·dim(s)), no allocation.
func (p *Projection) Code(obs []float32) uint64 {
	if len(obs) != p.dim {
		panic("actor: Projection.Code: observation width mismatch")
	}
	h := uint64(0x9e3779b97f4a7c15)
	for _, row := range p.m {
		var v float64
		for j, x := range obs {
			v += row[j] * float64(x)
		}
		q := int64(math.Round(v * 1e6)) // 6 decimals, as the authors' code
		h = splitmix64(h ^ uint64(q))
	}
	return h
}
