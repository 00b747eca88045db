package model

import (
	"fmt"
	"math"
)

// Activation is an element-wise nonlinearity applied to a Dense layer's
// output. The zero value is "unset": Config fills in its defaults (ReLU for
// hidden layers, Identity for the output layer) and NewDense refuses it.
//
// Every activation's derivative is computed from its output y (never from
// the pre-activation), so a layer keeps one buffer per batch:
//
//	Identity  y = x               dy/dx = 1
//	ReLU      y = max(x, 0)       dy/dx = 1 if y > 0, else 0
//	Tanh      y = tanh(x)         dy/dx = 1 - y²
//	Softsign  y = x / (1 + |x|)   dy/dx = 1/(1+|x|)² = (1 - |y|)²
type Activation uint8

const (
	Identity Activation = iota + 1
	ReLU
	Tanh
	Softsign
)

var activationNames = [...]string{Identity: "identity", ReLU: "relu", Tanh: "tanh", Softsign: "softsign"}

func (a Activation) valid() bool { return a >= Identity && a <= Softsign }

// String returns the activation's name ("identity", "relu", "tanh",
// "softsign"), or "Activation(n)" for a value that is none of them.
func (a Activation) String() string {
	if a.valid() {
		return activationNames[a]
	}
	if a == 0 {
		return "unset"
	}
	return fmt.Sprintf("Activation(%d)", uint8(a))
}

// ParseActivation returns the activation named s (as String writes it).
func ParseActivation(s string) (Activation, error) {
	for a := Identity; a <= Softsign; a++ {
		if activationNames[a] == s {
			return a, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown activation %q (valid: identity, relu, tanh, softsign)", ErrConfig, s)
}

// MarshalText encodes a as its name; the zero value encodes as "".
func (a Activation) MarshalText() ([]byte, error) {
	if a == 0 {
		return []byte{}, nil
	}
	if !a.valid() {
		return nil, fmt.Errorf("%w: invalid activation %d", ErrConfig, uint8(a))
	}
	return []byte(activationNames[a]), nil
}

// UnmarshalText decodes a name written by MarshalText ("" is the zero
// value).
func (a *Activation) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*a = 0
		return nil
	}
	v, err := ParseActivation(string(b))
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// apply sets y[i] = f(y[i]) in place.
func (a Activation) apply(y []float64) {
	switch a {
	case ReLU:
		for i, v := range y {
			if !(v > 0) { // NaN stays NaN below
				if v == v {
					y[i] = 0
				}
			}
		}
	case Tanh:
		for i, v := range y {
			y[i] = math.Tanh(v)
		}
	case Softsign:
		for i, v := range y {
			y[i] = v / (1 + math.Abs(v))
		}
	}
}

// backprop sets dz[i] = dy[i]·f'(x[i]), with f' written in terms of the
// output y[i] = f(x[i]). It must not be called for Identity (dz is dy).
func (a Activation) backprop(dz, dy, y []float64) {
	dz = dz[:len(y)]
	dy = dy[:len(y)]
	switch a {
	case ReLU:
		for i, v := range y {
			if v > 0 {
				dz[i] = dy[i]
			} else {
				dz[i] = 0
			}
		}
	case Tanh:
		for i, v := range y {
			dz[i] = dy[i] * (1 - v*v)
		}
	case Softsign:
		for i, v := range y {
			s := 1 - math.Abs(v)
			dz[i] = dy[i] * s * s
		}
	default:
		panic("model: backprop through " + a.String())
	}
}
