#!/bin/sh
# Regenerates replay.pb.go and replay_grpc.pb.go from replay.proto with
# Debian's protoc (protobuf-compiler) and the code generators pinned as
# tool dependencies in go.mod. Usage: sh gen.sh [OUTDIR] (default: here).
set -eu
cd "$(dirname "$0")"
out=${1:-.}
command -v protoc >/dev/null || { echo "gen.sh: protoc not found: apt-get install protobuf-compiler" >&2; exit 1; }
gen_go=$(go tool -n protoc-gen-go)
gen_grpc=$(go tool -n protoc-gen-go-grpc)
protoc -I. \
  --plugin=protoc-gen-go="$gen_go" --go_out="$out" --go_opt=paths=source_relative \
  --plugin=protoc-gen-go-grpc="$gen_grpc" --go-grpc_out="$out" --go-grpc_opt=paths=source_relative \
  replay.proto
