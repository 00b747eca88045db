#!/usr/bin/env bash
# Builds the apex container image FROM scratch around the static binary.
#
#   deploy/build-image.sh [TAG]     (TAG defaults to apex:dev)
#
# APEX_BINARY=path uses that binary instead of building one; it must be
# static (CGO_ENABLED=0), as the tests' build is.
#
# The build context is a temporary folder holding only what the image
# needs (deploy/Dockerfile, the binary, two empty folders), so nothing of
# the source tree is sent to the Docker daemon. Needs go and docker; pulls
# nothing (FROM scratch). Prints the image ID.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tag=${1:-apex:dev}
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
if [[ -n "${APEX_BINARY:-}" ]]; then
	cp "$APEX_BINARY" "$ctx/apex"
else
	(cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$ctx/apex" ./cmd/apex)
fi
cp "$root/deploy/Dockerfile" "$ctx/Dockerfile"
mkdir -p "$ctx/state/pki" "$ctx/state/data"
chmod 0700 "$ctx/state/pki"
chmod 0755 "$ctx/state/data"
# DOCKER_BUILDKIT=0: the classic builder, present with every engine (this
# project's machines have no buildx plugin); the image is the same.
DOCKER_BUILDKIT=0 docker build -q -t "$tag" "$ctx"
