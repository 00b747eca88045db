package remote

import (
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
)

// TestTieredPoolClasses checks the pool's size classes: a Get is as long
// as asked with the capacity of the smallest class that holds it, a Put
// keeps only buffers of a class's exact capacity, and sizes above the
// largest class are plain allocations.
func TestTieredPoolClasses(t *testing.T) {
	p := &tieredPool{}
	for _, c := range []struct{ n, cap int }{
		{1, 256}, {256, 256}, {257, 512}, {4096, 4096}, {37 << 10, 64 << 10},
		{1 << 20, 1 << 20}, {1<<20 + 1, 2 << 20}, {2 << 20, 2 << 20},
	} {
		b := p.Get(c.n)
		if len(*b) != c.n || cap(*b) != c.cap {
			t.Errorf("Get(%d): len %d cap %d, want len %d cap %d", c.n, len(*b), cap(*b), c.n, c.cap)
		}
		p.Put(b)
	}
	if b := p.Get(2<<20 + 1); len(*b) != 2<<20+1 {
		t.Errorf("Get above the largest class: len %d", len(*b))
	}
	odd := make([]byte, 300, 300)
	p.Put(&odd) // not a class capacity: dropped
	if c := p.class(300); c != 1 {
		t.Fatalf("class(300) = %d, want 1 (512 bytes)", c)
	}
	for range 4 {
		if b := p.Get(300); cap(*b) != 512 {
			t.Fatalf("Get(300) after a Put of a 300-byte buffer: cap %d, want 512", cap(*b))
		}
	}
}

// TestWireCodecRoundTrip encodes a draw reply above gRPC's pooling
// threshold and a small message, splits the large one over frames as a
// transport would, and decodes both to equal messages; values that are
// not protobuf messages are refused.
func TestWireCodecRoundTrip(t *testing.T) {
	big := &replayv1.SampleReply{Kind: &replayv1.SampleReply_Batch{Batch: &replayv1.Batch{
		Id: 7, Incarnation: 9, Keys: make([]uint64, 512), Prob: make([]float64, 512), Weight: make([]float64, 512),
		Data: &replayv1.Columns{Rows: 512},
	}}}
	for i := range 512 {
		b := big.GetBatch()
		b.Keys[i], b.Prob[i], b.Weight[i] = uint64(i)*31, float64(i)/512, 1/float64(i+1)
	}
	small := &replayv1.Draw{Id: 3, Batch: 512, Step: 1}
	c := wireCodec{}
	for _, m := range []proto.Message{big, small} {
		data, err := c.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		raw := data.Materialize()
		// Split into 3 frames as a transport's reads would.
		var frames mem.BufferSlice
		for i, cut := 0, (len(raw)+2)/3; i < len(raw); i += cut {
			frames = append(frames, mem.SliceBuffer(raw[i:min(i+cut, len(raw))]))
		}
		data.Free()
		got := m.ProtoReflect().New().Interface()
		if err := c.Unmarshal(frames, got); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(got, m) {
			t.Errorf("%T: decoded message differs from the encoded one", m)
		}
	}
	if _, err := c.Marshal(struct{}{}); err == nil {
		t.Error("Marshal of a struct{}: no error")
	}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{0})}, new(int)); err == nil {
		t.Error("Unmarshal into an *int: no error")
	}
}
