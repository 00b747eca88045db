// Package actor holds the Ape-X actor's parts: the n-step adder (NStep)
// that turns environment steps into the transitions the learner replays.
// The acting loop itself (policy, per-actor exploration, local batching
// with initial priorities, parameter refresh) is built on it.
package actor
