// Package badinput holds the test helpers every package's bad-input tests
// share: a call that turns a panic into a test failure, and a check that a
// configuration's Validate refuses NaN and infinities in every float field,
// naming the field. Only tests import it.
package badinput

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// NoPanic runs f and returns its error; a panic becomes a test failure
// (naming the call) and an error.
func NoPanic(t testing.TB, name string, f func() error) (err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v", name, r)
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f()
}

// CheckNonFinite sets every exported float field of cfg (a struct; nested
// structs included, pointers not) to NaN, +Inf and −Inf in turn and
// requires validate to fail, without a panic, with an error wrapping want
// that names the field (or a struct holding it) as a word. The fields in
// infOK document +Inf as a meaningful value and are not set to it.
func CheckNonFinite[C any](t testing.TB, cfg C, want error, validate func(C) error, infOK ...string) {
	t.Helper()
	var fields []field
	floatFields(reflect.TypeOf(cfg), nil, nil, &fields)
	if len(fields) == 0 {
		t.Fatalf("%T has no float fields", cfg)
	}
	for _, f := range fields {
		quoted := make([]string, len(f.path))
		for i, p := range f.path {
			quoted[i] = regexp.QuoteMeta(p)
		}
		re := regexp.MustCompile(`\b(` + strings.Join(quoted, "|") + `)\b`)
		dotted := strings.Join(f.path, ".")
		for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
			if v > 0 && contains(infOK, dotted) {
				continue
			}
			c := cfg
			reflect.ValueOf(&c).Elem().FieldByIndex(f.idx).SetFloat(v)
			name := fmt.Sprintf("%T.%s = %v", cfg, dotted, v)
			err := NoPanic(t, name, func() error { return validate(c) })
			switch {
			case err == nil:
				t.Errorf("%s: accepted", name)
			case !errors.Is(err, want):
				t.Errorf("%s: %v, want %v", name, err, want)
			case !re.MatchString(err.Error()):
				t.Errorf("%s: %q does not name the field", name, err)
			}
		}
	}
}

type field struct {
	path []string
	idx  []int
}

// floatFields lists the exported float fields of typ, descending into
// nested structs.
func floatFields(typ reflect.Type, idx []int, path []string, out *[]field) {
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		ix := append(append([]int(nil), idx...), i)
		p := append(append([]string(nil), path...), f.Name)
		switch f.Type.Kind() {
		case reflect.Float64, reflect.Float32:
			*out = append(*out, field{p, ix})
		case reflect.Struct:
			floatFields(f.Type, ix, p, out)
		}
	}
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}
