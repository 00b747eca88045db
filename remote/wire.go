package remote

import (
	"fmt"
	"math/bits"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
)

// wireCodec is the gRPC codec of apex's servers and clients: the protobuf
// wire format and content subtype of gRPC's default codec ("proto"), so
// any gRPC client interoperates, but with its buffers from wirePool, which
// does not zero them. gRPC's default pool clears a whole tier on every Get,
// and its 1 MiB tier holds every message between 32 KiB and 1 MiB: a
// 512-row draw's 37 KB reply cost a 1 MiB clear, 16% of a replay server's
// CPU in a sampling load test. Nothing reads a pooled buffer beyond what
// was written into it (Marshal writes the message's exact size; a
// transport read fills the length it asks for), so zeroing buys nothing.
type wireCodec struct{}

func (wireCodec) Name() string { return "proto" }

// Marshal encodes v (a proto.Message) into one pooled buffer.
// Cost: proto.Size plus one encoding pass; above gRPC's pooling
// threshold the bytes go into a pooled buffer (no data allocation).
func (wireCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("remote: cannot marshal a %T: not a proto.Message", v)
	}
	size := proto.Size(m)
	opts := proto.MarshalOptions{UseCachedSize: true} // the Size call above cached every sub-message's size
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := opts.Marshal(m)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	buf := wirePool.Get(size)
	out, err := opts.MarshalAppend((*buf)[:0], m)
	if err != nil {
		wirePool.Put(buf)
		return nil, err
	}
	*buf = out
	return mem.BufferSlice{mem.NewBuffer(buf, wirePool)}, nil
}

// Unmarshal decodes data into v (a proto.Message). A message that came in
// several frames is first joined in one pooled buffer, as gRPC's codec does.
func (wireCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("remote: cannot unmarshal into a %T: not a proto.Message", v)
	}
	buf := data.MaterializeToBuffer(wirePool)
	defer buf.Free()
	return proto.Unmarshal(buf.ReadOnlyData(), m)
}

// poolClasses are wirePool's size classes: powers of two from 2^8 to
// 2^21, which holds MaxMessageBytes plus gRPC's framing.
const (
	poolMinShift = 8
	poolMaxShift = 21
)

// tieredPool is a mem.BufferPool of power-of-two size classes that hands
// buffers out as they were put back, not zeroed. Requests above the largest
// class are allocated and dropped on Put. Safe for concurrent use; Get and
// Put cost a sync.Pool operation.
type tieredPool struct {
	classes [poolMaxShift - poolMinShift + 1]sync.Pool
}

// wirePool is the buffer pool of wireCodec and of apex's gRPC transports.
var wirePool = &tieredPool{}

func (p *tieredPool) class(n int) int {
	if n <= 1<<poolMinShift {
		return 0
	}
	return bits.Len(uint(n-1)) - poolMinShift
}

// Get returns a buffer of length n (its contents are arbitrary).
func (p *tieredPool) Get(n int) *[]byte {
	c := p.class(n)
	if c >= len(p.classes) {
		b := make([]byte, n)
		return &b
	}
	if b, ok := p.classes[c].Get().(*[]byte); ok {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<(c+poolMinShift))
	return &b
}

// Put returns b to its class; a buffer whose capacity is not a class size
// (allocated above the largest class, or regrown by its user) is dropped.
func (p *tieredPool) Put(b *[]byte) {
	cp := cap(*b)
	c := p.class(cp)
	if c >= len(p.classes) || cp != 1<<(c+poolMinShift) {
		return
	}
	p.classes[c].Put(b)
}

// streamWindow and connWindow are HTTP/2 flow-control windows,
// fixed rather than grown by gRPC's BDP probes: a stream may have 256 KiB
// unread, enough for 6 draws of 512 CartPole rows in flight without
// waiting for a window update, and a connection 1 MiB in transit. What a
// peer can make the other side buffer is bounded per stream: gRPC returns
// connection-level window as soon as its transport reads the data, so a
// server holds at most streamWindow × MaxStreamsPerConn (64 MiB) unread
// per connection (gRPC's BDP estimator, off with fixed windows, would
// grow a stream's window far beyond 256 KiB).
// writeBuffer holds a whole 512-row reply (37 KB), so it leaves in one
// write instead of two.
const (
	streamWindow = 256 << 10
	connWindow   = 1 << 20
	writeBuffer  = 64 << 10
)

// WireDialOptions are the dial options every apex client of a replay or
// parameter server uses (Dial adds them itself): apex's codec (gRPC's wire
// format, buffers not zeroed), the transport's buffer pool, and the
// message size limit (replayv1.MaxMessageBytes) both ways. Embedders who
// dial with grpc.NewClient themselves should add them.
func WireDialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		experimental.WithBufferPool(wirePool),
		grpc.WithInitialWindowSize(streamWindow),
		grpc.WithInitialConnWindowSize(connWindow),
		grpc.WithWriteBufferSize(writeBuffer),
		grpc.WithDefaultCallOptions(
			grpc.ForceCodecV2(wireCodec{}),
			grpc.MaxCallRecvMsgSize(replayv1.MaxMessageBytes),
			grpc.MaxCallSendMsgSize(replayv1.MaxMessageBytes)),
	}
}

// wireServerOptions are WireDialOptions' server side.
func wireServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		experimental.BufferPool(wirePool),
		grpc.InitialWindowSize(streamWindow),
		grpc.InitialConnWindowSize(connWindow),
		grpc.WriteBufferSize(writeBuffer),
		grpc.ForceServerCodecV2(wireCodec{}),
		grpc.MaxRecvMsgSize(replayv1.MaxMessageBytes),
		grpc.MaxSendMsgSize(replayv1.MaxMessageBytes),
	}
}
