// Package remote holds the network adaptors of apex's replay: the replay
// stage served over gRPC (api/replay/v1) so actors on other hosts insert
// into it and a learner draws from it, with the same rows for the same
// seed as an in-process learner.
//
// The server side lives here now: the wire codec of a table's columns
// (EncodeTransitions, DecodeTransitions, EncodeBatch), keys (Key, RefOf:
// a stored item's slot and generation in one uint64) and the Replay
// server. The client side (insert writers, the learner's sampling client,
// parameter streams) follows in the same package.
//
// The package's pure parts (columns, keys) start no goroutines and
// allocate nothing per row; the server runs one goroutine per stream that
// gRPC hands it and ends every one of them on shutdown.
package remote
