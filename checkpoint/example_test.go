package checkpoint_test

import (
	"bytes"
	"fmt"
	"io"

	"github.com/apexrl/apex/checkpoint"
)

// counter is an embedder's stateful part: it writes only its payload, and
// the checkpoint package frames it.
type counter struct {
	Name  string
	Count int
	Sums  []float64
}

func (c *counter) Save(w io.Writer) error {
	return checkpoint.Save(w, "example.counter", 1, func(w io.Writer) error {
		if err := checkpoint.WriteJSON(w, struct {
			Name  string
			Count int
		}{c.Name, c.Count}); err != nil {
			return err
		}
		return checkpoint.WriteFloat64s(w, c.Sums)
	})
}

func (c *counter) Load(r io.Reader) error {
	return checkpoint.Load(r, "example.counter", 1, func(_ uint32, r io.Reader) error {
		var h struct {
			Name  string
			Count int
		}
		if err := checkpoint.ReadJSON(r, &h, 1<<10); err != nil {
			return err
		}
		if h.Count < 0 || h.Count > 1<<20 {
			return fmt.Errorf("count %d out of range", h.Count)
		}
		sums, err := checkpoint.ReadFloat64s(r, h.Count)
		if err != nil {
			return err
		}
		c.Name, c.Count, c.Sums = h.Name, h.Count, sums
		return nil
	})
}

func Example() {
	var file bytes.Buffer
	a := &counter{Name: "steps", Count: 2, Sums: []float64{1.5, 2.5}}
	if err := a.Save(&file); err != nil {
		panic(err)
	}
	var b counter
	if err := b.Load(&file); err != nil {
		panic(err)
	}
	fmt.Println(b.Name, b.Count, b.Sums)
	// Output: steps 2 [1.5 2.5]
}
