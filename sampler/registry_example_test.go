package sampler_test

import (
	"fmt"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/sampler"
)

// ExampleRegister adds a replay method from outside the package: uniform
// selection with an option of its own. Once registered, NewMethod builds
// it, the runtime trains with it (TrainConfig.Sampler, MethodOptions) and
// apex's command line offers it with its flag.
func ExampleRegister() {
	if _, ok := sampler.Lookup("example-uniform"); !ok { // once per process
		err := sampler.Register(sampler.Spec{
			Name:     "example-uniform",
			Doc:      "uniform selection, for the example",
			Options:  []sampler.Option{{Name: "example-uniform-k", Usage: "example-uniform: a count (0: 1)", Int: true}},
			Learners: []string{"dqn", "td3", "sac"},
			Build: func(buf *buffer.Buffer, cfg sampler.MethodConfig) (sampler.Method, error) {
				fmt.Println("built with k =", cfg.Option("example-uniform-k"))
				u := sampler.NewUniform(buf)
				return sampler.Method{Selector: u, Weighter: u}, nil
			},
		})
		if err != nil {
			panic(err)
		}
	}
	buf, err := buffer.New(buffer.Config{Capacity: 64, ObsDim: 1, NumActions: 2})
	if err != nil {
		panic(err)
	}
	m, err := sampler.NewMethod("example-uniform", buf, sampler.MethodConfig{Options: map[string]float64{"example-uniform-k": 3}})
	if err != nil {
		panic(err)
	}
	fmt.Println(m.Name, m.Selector.String())
	_, err = sampler.NewMethod("per", buf, sampler.MethodConfig{Options: map[string]float64{"example-uniform-k": 3}})
	fmt.Println(err)
	// Output:
	// built with k = 3
	// example-uniform uniform
	// sampler: invalid replay method: method "per": option example-uniform-k configures example-uniform only
}
