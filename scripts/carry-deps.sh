#!/usr/bin/env bash
# Copies the header-only libraries Loom's build needs (nlohmann/json, {fmt}) from this
# machine's system headers into .carry/deps/include, for a machine that has no package
# registry (the GPU machine): carry .carry/ along, and the build finds them there
# (CMakeLists.txt: LOOM_DEPS_DIR defaults to .carry/deps; scripts/gpu-check.sh passes
# it). Install them here first: scripts/install-deps.sh (Debian: nlohmann-json3-dev,
# libfmt-dev).
#   bash scripts/carry-deps.sh [DEST]     (default DEST: .carry/deps)
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-.carry/deps}
src=${LOOM_SYSTEM_INCLUDE:-/usr/include}
for dir in nlohmann fmt; do
  if [ ! -d "$src/$dir" ]; then
    echo "carry-deps: $src/$dir is missing: run scripts/install-deps.sh (apt-get install nlohmann-json3-dev libfmt-dev)" >&2
    exit 1
  fi
done
mkdir -p "$dest/include"
for dir in nlohmann fmt; do
  rm -rf "${dest:?}/include/$dir"
  cp -r "$src/$dir" "$dest/include/$dir"
done
echo "carry-deps: $(du -sh "$dest" | cut -f1) in $dest/include (nlohmann, fmt); carry $dest along"
