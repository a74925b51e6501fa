#!/usr/bin/env bash
# Builds the pinned Garage release from crates.io into a cache folder outside
# the repository and prints the binary's path. Reuses a cached build whose
# version matches. Slow the first time (a debug build of hundreds of crates).
set -euo pipefail
GARAGE_VERSION=${GARAGE_VERSION:-2.5.0}
cache=${CAIRN_CACHE:-$HOME/.cache/cairn-state}/garage-$GARAGE_VERSION
bin=$cache/bin/garage
if [ -x "$bin" ] && "$bin" --version 2>/dev/null | grep -qE "(v|:)$GARAGE_VERSION( |$)"; then
  echo "$bin"
  exit 0
fi
mkdir -p "$cache"
echo "building garage $GARAGE_VERSION into $cache (this takes a while)" >&2
cargo install garage --version "$GARAGE_VERSION" --locked \
  --no-default-features --features bundled-libs,sqlite --debug \
  --root "$cache" >&2
"$bin" --version >&2
echo "$bin"
