package sampler

import "github.com/apexrl/apex/buffer"

// uniformSpec is uniform replay: every stored item equally likely, with
// the learner's loss and weights 1 (Ape-X without prioritization; TD3's
// and SAC's own replay).
func uniformSpec() Spec {
	return Spec{
		Name:     "uniform",
		Doc:      "uniform selection with the learner's loss (weights 1)",
		Learners: []string{"dqn", "td3", "sac"},
		Build: func(buf *buffer.Buffer, _ MethodConfig) (Method, error) {
			u := NewUniform(buf)
			return Method{Selector: u, Weighter: u, Positional: uniformAt{buf}}, nil
		},
	}
}
