package runtime

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/apexrl/apex/buffer"
	"github.com/apexrl/apex/envs"
	"github.com/apexrl/apex/model"
	"github.com/apexrl/apex/sampler"
)

// This file is the runtime's side of the replay methods: it knows them
// only through their registered sampler.Spec (sampler.Methods,
// sampler.Lookup), never by name.

// discreteAlgos are the learners that take discrete actions; the others
// (Algos) take continuous ones.
var discreteAlgos = []string{"dqn"}

// methodSpec returns the Spec of the run's method, or an error listing the
// registered ones.
func methodSpec(name string) (sampler.Spec, error) {
	s, ok := sampler.Lookup(name)
	if !ok {
		return s, fmt.Errorf("runtime: train: unknown sampler %q (valid: %s)", name, strings.Join(sampler.Methods(), ", "))
	}
	return s, nil
}

// algoFor returns the algorithm for an action space and replay method:
// cfg's if set (checked against both), else the first learner the method
// pairs with that takes the action space (dqn for discrete actions; for
// continuous ones td3, or vracer under a ReF-ER method).
func algoFor(algo, env string, spec sampler.Spec, space envs.Space) (string, error) {
	_, discrete := space.(envs.Discrete)
	if algo != "" && !slices.Contains(Algos, algo) {
		return "", fmt.Errorf("runtime: train: unknown algo %q (valid: %v)", algo, Algos)
	}
	// A learner the method names takes the run if this runtime has it
	// (Algos) and it takes the environment's actions.
	takes := func(a string) bool { return slices.Contains(Algos, a) && slices.Contains(discreteAlgos, a) == discrete }
	if !slices.ContainsFunc(spec.Learners, takes) { // no learner here both takes the actions and replays through the method
		var others []string
		for _, s := range sampler.Specs() {
			if slices.ContainsFunc(s.Learners, takes) {
				others = append(others, s.Name)
			}
		}
		kind, want := "a continuous", "discrete"
		if discrete {
			kind, want = "a discrete", "continuous"
		}
		return "", fmt.Errorf("runtime: train: the %s replay method needs the %s learner, which needs %s actions: "+
			"%s has %s action space; use another -sampler (%s) or an environment with %s actions",
			spec.Name, sampler.Phrase(spec.Learners, "or"), want, env, kind, strings.Join(others, ", "), want)
	}
	if algo == "" {
		algo = spec.Learners[slices.IndexFunc(spec.Learners, takes)]
	}
	switch {
	case algo == "dqn" && !discrete:
		return "", fmt.Errorf("runtime: train: %s has a continuous action space; the dqn learner needs discrete actions (use -algo=td3)", env)
	case algo != "dqn" && discrete:
		return "", fmt.Errorf("runtime: train: %s has a discrete action space; the %s learner needs continuous actions (use -algo=dqn)", env, algo)
	case !spec.PairsWith(algo):
		var with []string
		for _, s := range sampler.Specs() {
			if s.PairsWith(algo) {
				with = append(with, s.Name)
			}
		}
		return "", fmt.Errorf("runtime: train: the %s replay method needs the %s learner (-algo); the %s learner replays through %s (-sampler)",
			spec.Name, sampler.Phrase(spec.Learners, "or"), algo, sampler.Phrase(with, "or"))
	}
	return algo, nil
}

// setting is one TrainConfig field that configures only some learners or
// replay methods.
type setting struct {
	set   bool   // the field is not zero
	name  string // "Field (-flag)", or "-option" for a method's option
	ok    bool   // the run's learner or method uses it
	what  string // what it configures
	clear func(*TrainConfig)
}

// checkApplies refuses settings that the run's learner (algo) or replay
// method would ignore, so that a setting never silently does nothing (the
// flag each field comes from is named for the command line's users).
func checkApplies(cfg TrainConfig, algo string) error {
	for _, r := range methodSettings(&cfg) {
		if r.set && !r.ok {
			return fmt.Errorf("runtime: train: %s configures %s; this run's method is %s", r.name, r.what, cfg.Sampler)
		}
	}
	for _, r := range learnerSettings(&cfg, algo) {
		if r.set && !r.ok {
			return fmt.Errorf("runtime: train: %s configures %s; this run's learner is %s", r.name, r.what, algo)
		}
	}
	return nil
}

// dropIgnored clears the settings of c that its learner (c.Algo) or method
// ignores. A checkpoint saved before such settings were refused may carry
// them; they had no effect on that run, and clearing them lets it resume.
func dropIgnored(c TrainConfig) TrainConfig {
	for _, r := range append(methodSettings(&c), learnerSettings(&c, c.Algo)...) {
		if !r.ok {
			r.clear(&c)
		}
	}
	return c
}

// methodSettings are c's settings that only some replay methods use, with
// ok for c's method (c.Sampler): every registered method's options (a
// method without a Spec takes none).
func methodSettings(c *TrainConfig) []setting {
	spec, _ := sampler.Lookup(c.Sampler)
	var out []setting
	for _, o := range sampler.Options() {
		name := o.Name
		out = append(out, setting{c.MethodOptions[name] != 0, "-" + name, spec.TakesOption(name),
			"the " + sampler.Phrase(sampler.OptionMethods(name), "and") + " method" + plural(len(sampler.OptionMethods(name))),
			func(c *TrainConfig) { c.setOption(name, 0) }})
	}
	return out
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// setOption sets the method option called name to v in a copy of
// c.MethodOptions (0: removes it), so that copies of c never share it.
func (c *TrainConfig) setOption(name string, v float64) {
	if c.MethodOptions[name] == v {
		return
	}
	m := maps.Clone(c.MethodOptions)
	if m == nil {
		m = map[string]float64{}
	}
	if v == 0 {
		delete(m, name)
	} else {
		m[name] = v
	}
	if len(m) == 0 {
		m = nil
	}
	c.MethodOptions = m
}

// checkOptions refuses method options no method has and values no option
// can take, naming the flag.
func checkOptions(c TrainConfig) error {
	opts := sampler.Options()
	for _, name := range slices.Sorted(maps.Keys(c.MethodOptions)) {
		i := slices.IndexFunc(opts, func(o sampler.Option) bool { return o.Name == name })
		if i < 0 {
			names := make([]string, len(opts))
			for j, o := range opts {
				names[j] = o.Name
			}
			return fmt.Errorf("runtime: train: MethodOptions: unknown option %q (the methods' options: %s)", name, strings.Join(names, ", "))
		}
		if err := opts[i].Check(c.MethodOptions[name]); err != nil {
			return fmt.Errorf("runtime: train: %w", err)
		}
	}
	return nil
}

// Option returns the value of the replay method's option called name in
// c.MethodOptions (0: unset, the method's default). O(1).
func (c TrainConfig) Option(name string) float64 { return c.MethodOptions[name] }

// WithOption returns c with the replay method's option called name set to
// v (0: unset), without changing c's MethodOptions map. O(options).
func (c TrainConfig) WithOption(name string, v float64) TrainConfig {
	c.setOption(name, v)
	return c
}

// trainConfigKeys are the JSON keys of TrainConfig's own fields.
var trainConfigKeys = func() map[string]bool {
	keys := map[string]bool{}
	t := reflect.TypeFor[TrainConfig]()
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			keys[name] = true
		}
	}
	return keys
}()

// UnmarshalJSON decodes a TrainConfig, also from the JSON of releases
// that kept each method option in a field of its own ("ter_eta": the
// option's name with '_' for '-'): such a value goes to MethodOptions
// unless that already has the option.
func (c *TrainConfig) UnmarshalJSON(b []byte) error {
	type plain TrainConfig
	if err := json.Unmarshal(b, (*plain)(c)); err != nil {
		return err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return err
	}
	for _, o := range sampler.Options() {
		key := strings.ReplaceAll(o.Name, "-", "_")
		raw, ok := fields[key]
		if !ok || trainConfigKeys[key] { // a field of TrainConfig's own, not an option's
			continue
		}
		var v float64
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("runtime: TrainConfig: %s: %w", key, err)
		}
		if _, set := c.MethodOptions[o.Name]; !set && v != 0 {
			c.setOption(o.Name, v)
		}
	}
	return nil
}

// bufferConfig is the replay layout cfg needs for env's spaces: the
// episode columns every run stores, plus what the method's Layout adds.
func bufferConfig(cfg TrainConfig, spec sampler.Spec, mc sampler.MethodConfig, obsDim int, space envs.Space) buffer.Config {
	c := buffer.Config{Capacity: cfg.Capacity, ObsDim: obsDim, Episode: true}
	switch s := space.(type) {
	case envs.Discrete:
		c.NumActions = s.N
	case envs.Box:
		c.Action, c.ActionDim = buffer.Continuous, s.Dim()
	}
	if spec.Layout != nil {
		spec.Layout(mc, &c)
	}
	return c
}

// methodConfig is the replay method cfg asks for on env's spaces.
func methodConfig(cfg TrainConfig, spec sampler.Spec, betaSteps int64, env envs.Env) (sampler.MethodConfig, error) {
	mc := sampler.MethodConfig{BetaSteps: betaSteps, NoIS: cfg.NoIS, Options: maps.Clone(cfg.MethodOptions),
		Learner: cfg.Algo, Horizon: env.MaxEpisodeSteps(), Seed: cfg.Seed}
	if box, ok := env.ActionSpace().(envs.Box); ok && len(box.High) > 0 {
		mc.ActionScale = box.High[0] // symmetric boxes (the continuous agents refuse others)
	}
	if cfg.Loss != "" {
		if err := mc.Loss.Kind.UnmarshalText([]byte(cfg.Loss)); err != nil {
			return mc, fmt.Errorf("runtime: train: Loss: %w", err)
		}
	}
	if spec.OwnLoss != nil {
		// The method derives its loss from its options: a Loss naming
		// its kind says nothing more (and Huber's zero value could not be
		// told from none further down); another kind is refused here.
		own, err := spec.OwnLoss(mc)
		if err != nil {
			return mc, fmt.Errorf("runtime: train: %w", err)
		}
		if cfg.Loss != "" && mc.Loss.Kind != own.Kind {
			return mc, fmt.Errorf("runtime: train: Loss (-loss) %s: the %s method pairs with the %s loss (from its options)", cfg.Loss, spec.Name, sampler.LossName(own))
		}
		mc.Loss = model.Loss{}
	}
	return mc, nil
}

// withMethodStats adds the method's own counters to ls (if it has any).
func withMethodStats(ls LearnerStats, m sampler.Method) LearnerStats {
	if m.Stats != nil {
		ls.Method = m.Stats()
	}
	return ls
}
