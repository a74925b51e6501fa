#!/usr/bin/env bash
# Builds the pinned Garage release from crates.io into a cache folder outside
# the repository and prints the binary's path. Reuses a cached build whose
# version matches. Slow the first time (a debug build of hundreds of crates:
# about 4 minutes on 2 cores, 350 MB binary). Needs a Rust toolchain (cargo,
# a recent stable rustc; built here with 1.95.0), a C compiler and make: the bundled
# libsodium is built with its ./configure && make, zstd and SQLite with cc.
# On Debian/Ubuntu: apt-get install -y build-essential, plus rustup.
set -euo pipefail
GARAGE_VERSION=${GARAGE_VERSION:-2.5.0}
cache=${CAIRN_CACHE:-$HOME/.cache/cairn-state}/garage-$GARAGE_VERSION
bin=$cache/bin/garage
if [ -x "$bin" ] && "$bin" --version 2>/dev/null | grep -qE "(v|:)$GARAGE_VERSION( |$)"; then
  echo "$bin"
  exit 0
fi
missing=
for tool in cargo cc make; do
  command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
done
if [ -n "$missing" ]; then
  echo "install-garage: missing:$missing. Install a Rust toolchain (https://rustup.rs) and a C toolchain (Debian/Ubuntu: apt-get install -y build-essential), or set GARAGE_BIN to a garage $GARAGE_VERSION binary." >&2
  exit 1
fi
mkdir -p "$cache"
echo "building garage $GARAGE_VERSION into $cache (this takes a while)" >&2
cargo install garage --version "$GARAGE_VERSION" --locked \
  --no-default-features --features bundled-libs,sqlite --debug \
  --root "$cache" >&2
"$bin" --version >&2
echo "$bin"
