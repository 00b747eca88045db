package main

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/apexrl/apex/envs"
	"github.com/apexrl/apex/runtime"
	"github.com/apexrl/apex/sampler"
)

// The flags of a run come in two groups, each defined in one place and
// shared by the commands that take them:
//
//   - runFlags shape the run: the environment, the replay method and its
//     options, the learner's algorithm and hyperparameters, the actors'
//     exploration. apex train takes them, and so does apex replay: the
//     replay server is a distributed run's configuration authority, and
//     learner and actor hosts build their parts from what it serves.
//   - learnerFlags are a learner process's own: when to stop, the
//     learner's precision and workers. apex train and apex learner take
//     them.

// addRunFlags defines the run-shaping flags on fs, writing into cfg (whose
// values are the defaults). The replay methods' option flags come later,
// from methodFlags, after the command's own flags.
func addRunFlags(fs *flag.FlagSet, cfg *runtime.TrainConfig) {
	def := *cfg
	fs.IntVar(&cfg.Actors, "actors", def.Actors, "actor goroutines (>= 1)")
	fs.StringVar(&cfg.Env, "env", def.Env, "environment: "+strings.Join(envs.Names(), ", "))
	fs.StringVar(&cfg.Sampler, "sampler", def.Sampler, "replay method (a selection stage paired with its loss): "+strings.Join(sampler.Methods(), ", ")+" (apex methods describes each)")
	fs.StringVar(&cfg.Algo, "algo", "", "learner: "+strings.Join(runtime.Algos, ", ")+" (empty: dqn for discrete actions; for continuous ones vracer under a ReF-ER -sampler, else td3; sac on request, with any -sampler but the ReF-ER ones)")
	learnerLoss, ownLoss, weighted := methodKinds()
	fs.StringVar(&cfg.Loss, "loss", "", "per-sample loss of the "+sampler.Phrase(learnerLoss, "and")+" methods (of td3's and sac's critics): huber, mse or l1 (empty: dqn huber, td3 and sac mse; "+
		sampler.Phrase(ownLoss, "and")+" derive theirs from their options and take only its kind; vracer has its own)")
	fs.BoolVar(&cfg.NoIS, "no-is", false, sampler.Phrase(weighted, "and")+" without importance weights (with -loss=mse a biased pairing: allowed, with a warning)")
	fs.Float64Var(&cfg.Tau, "tau", 0, "Polyak rate of the target networks (0: dqn hard copies every 500 steps, td3 and sac 0.005)")
	fs.Float64Var(&cfg.Epsilon, "epsilon", 0, "every dqn actor's exploration rate (0: Ape-X's per-actor schedule 0.4^(1+7i/(N-1)))")
	fs.Int64Var(&cfg.EpsilonDecaySteps, "epsilon-decay", 0, "dqn: anneal each actor's exploration rate from 1 to its rate over its first N environment steps (0: no annealing)")
	fs.Float64Var(&cfg.Sigma, "sigma", 0, "td3 actors' Gaussian exploration noise, in units of the action half-range (0: 0.1; 0.2 under a ReF-ER -sampler)")
	fs.Float64Var(&cfg.OUTheta, "ou-theta", 0, "td3: Ornstein-Uhlenbeck exploration noise with this mean reversion (e.g. 0.15 with -sigma=0.5 for MountainCarContinuous; 0: independent Gaussian noise)")
	fs.IntVar(&cfg.RandomSteps, "random-steps", 0, "td3 and sac: uniformly random actions taken first, shared by the actors (0: the minimum replay size before learning)")
	fs.Uint64Var(&cfg.Seed, "seed", def.Seed, "random seed")
	fs.IntVar(&cfg.Batch, "batch", 0, "learner batch size (0: the learner's default)")
	fs.Float64Var(&cfg.LR, "lr", 0, "Adam learning rate (0: the learner's default)")
	fs.IntVar(&cfg.NStep, "n-step", 0, "n-step return length (0: dqn 3, td3 and sac 1)")
	fs.Float64Var(&cfg.ReplayRatio, "replay-ratio", 0, "sampled transitions per inserted transition, kept by the rate limiter (0: dqn 4, td3 and sac the batch size: one learner step per environment step)")
	fs.IntVar(&cfg.Capacity, "capacity", def.Capacity, "replay capacity in transitions")
	fs.BoolVar(&cfg.Dueling, "dueling", false, "dueling Q head")
	fs.IntVar(&cfg.RefreshEvery, "refresh-every", 0, "environment steps between two reads of the learner's parameters by each actor (0: so that the actors lag the learner by about 400 learner steps: Ape-X's 400 with one actor, 100 for dqn's defaults and 6 for td3 and sac with 64 actors; vracer 20)")
	fs.IntVar(&cfg.MinSizeToSample, "min-replay", def.MinSizeToSample, "replay size before learning starts (0: max(1000, batch+50))")
}

// addLearnerFlags defines a learner process's own flags on fs (apex train
// and apex learner), writing into cfg (whose values are the defaults).
func addLearnerFlags(fs *flag.FlagSet, cfg *runtime.TrainConfig) {
	def := *cfg
	fs.Int64Var(&cfg.Steps, "steps", 0, "stop after this many learner steps (0: no limit)")
	fs.DurationVar(&cfg.Duration, "duration", def.Duration, "stop after this much wall time (0: no limit)")
	fs.Float64Var(&cfg.TargetReturn, "target-return", 0, "stop once solved: a periodic evaluation and a confirming final evaluation reach this mean return (0: the environment's published threshold, if -stop-when-solved)")
	fs.BoolVar(&cfg.StopWhenSolved, "stop-when-solved", def.StopWhenSolved, "stop at the environment's published solved threshold (CartPole-v1 475, Acrobot-v1 -100, MountainCar-v0 -110) when -target-return is 0")
	fs.BoolVar(&cfg.Float32, "float32", def.Float32, "the learner's networks, targets and Adam on float32 SIMD kernels (AVX-512/AVX2, portable Go elsewhere): several times faster learner steps, at float32 precision (parameters rounded to float32 every step; not bit-identical to a float64 run); actors stay float64; -float32=false: the float64 learner; a -resume may switch it (the float64 master parameters and Adam's moments carry over, and a warning names the conversion)")
	fs.IntVar(&cfg.LearnerWorkers, "learner-workers", 0, "goroutines a learner step's batch is split over (data parallel: each computes its rows' gradient, one reduction in fixed order, one Adam step); 0: 1, the serial step; dqn, td3 (not with -sampler=refer) and sac; not vracer; W > 1 changes float sums (same W, same bits)")
}

// flagsSet returns the names of fs's flags given on the command line.
func flagsSet(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// checkRunFlags validates the run-shaping flags set on fs (names of
// environments, learners and methods; counts that must be positive or not
// negative) and stores the method options in cfg. Flags that fs does not
// define are skipped, so it serves every command that takes some of them.
func checkRunFlags(fs *flag.FlagSet, cfg *runtime.TrainConfig, opts methodOptionFlags) error {
	if !slices.Contains(envs.Names(), cfg.Env) {
		return fmt.Errorf("unknown -env %q (valid: %s)", cfg.Env, strings.Join(envs.Names(), ", "))
	}
	if cfg.Algo != "" && !slices.Contains(runtime.Algos, cfg.Algo) {
		return fmt.Errorf("unknown -algo %q (valid: %s)", cfg.Algo, strings.Join(runtime.Algos, ", "))
	}
	if _, ok := sampler.Lookup(cfg.Sampler); !ok {
		return fmt.Errorf("unknown -sampler %q (valid: %s)", cfg.Sampler, strings.Join(sampler.Methods(), ", "))
	}
	set := flagsSet(fs)
	for name, v := range map[string]float64{"actors": float64(cfg.Actors), "n-step": float64(cfg.NStep),
		"capacity": float64(cfg.Capacity), "replay-ratio": cfg.ReplayRatio} {
		if set[name] && !(v > 0) {
			return fmt.Errorf("-%s must be positive, got %v", name, v)
		}
	}
	counts := []string{"steps", "duration", "batch", "min-replay", "refresh-every", "random-steps", "epsilon-decay", "checkpoint-every", "learner-workers"}
	for _, o := range sampler.Options() {
		if o.Int {
			counts = append(counts, o.Name)
		}
	}
	if err := checkCounts(fs, counts); err != nil {
		return err
	}
	cfg.MethodOptions = opts.values(set)
	return nil
}

// checkCounts refuses a negative value of any of fs's flags named in names
// (counts and times, where 0 means the default or none); names fs does not
// define are skipped.
func checkCounts(fs *flag.FlagSet, names []string) error {
	for _, name := range names {
		f := fs.Lookup(name)
		if f == nil {
			continue
		}
		var n int64
		switch v := f.Value.(flag.Getter).Get().(type) {
		case int:
			n = int64(v)
		case int64:
			n = v
		case time.Duration:
			n = int64(v)
		}
		if n < 0 {
			return fmt.Errorf("-%s must not be negative, got %s", name, f.Value)
		}
	}
	return nil
}
