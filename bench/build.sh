#!/usr/bin/env bash
# bench/build.sh: builds build-bench/ with the flags of ./dev build
# (RelWithDebInfo) plus the bench programs (-DLUASTREAM_BENCH=ON); prints
# nothing unless it fails. The bench scripts call it first.
#
# Usage: bench/build.sh            (BENCH_REV=REV bench/build.sh)
#
# By default it builds the working tree. With BENCH_REV set (a commit, e.g.
# HEAD) it builds that commit's host/, lua/, cmake/ (when it has one) and
# CMakeLists.txt with the working tree's bench/, from a copy in
# build-bench/src: the numbers are then those of a commit, whatever is being
# edited meanwhile. The binaries have their Lua library compiled in (commits
# before that find it in the tree they were built from). Log:
# build-bench/bench-build.log.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p build-bench
log=build-bench/bench-build.log
src=$PWD
if [ -n "${BENCH_REV:-}" ]; then
  rev=$(git rev-parse --verify "$BENCH_REV^{commit}")
  src=$PWD/build-bench/src
  if [ "$(cat "$src/.rev" 2>/dev/null)" != "$rev" ]; then
    rm -rf "$src"
    mkdir -p "$src"
    # The files dated now (-m), not at their commit: objects built from
    # another commit are newer than an older commit's files, and make would
    # keep them.
    # shellcheck disable=SC2046 # cmake/ only in commits that have it
    git archive "$rev" host lua CMakeLists.txt $(git ls-tree --name-only "$rev" cmake) | tar -x -m -C "$src"
    echo "$rev" >"$src/.rev"
  fi
  # bench/ as it is now; the commit's CMakeLists.txt may predate it
  rm -rf "$src/bench"
  tar -c --exclude=bench/out --exclude=bench/peers/node_modules bench | tar -x -C "$src"
  grep -q 'add_subdirectory(bench)' "$src/CMakeLists.txt" ||
    printf '\noption(LUASTREAM_BENCH "bench" OFF)\nif(LUASTREAM_BENCH)\n  add_subdirectory(bench)\nendif()\n' >>"$src/CMakeLists.txt"
fi
# A cache made from another source tree cannot be reused.
if [ -f build-bench/CMakeCache.txt ] &&
   ! grep -qx "CMAKE_HOME_DIRECTORY:INTERNAL=$src" build-bench/CMakeCache.txt; then
  rm -rf build-bench/CMakeCache.txt build-bench/CMakeFiles
fi
if ! { cmake -S "$src" -B build-bench --log-level=WARNING -DCMAKE_BUILD_TYPE=RelWithDebInfo \
         -DLUASTREAM_BENCH=ON -DLUASTREAM_TESTS=OFF &&
       cmake --build build-bench -j"$(nproc)"; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "bench/build.sh: build failed (log: $log)${BENCH_REV:+}" >&2
  [ -n "${BENCH_REV:-}" ] || echo "bench/build.sh: BENCH_REV=HEAD measures the last commit instead of the working tree" >&2
  exit 1
fi
echo "${BENCH_REV:+$(git rev-parse --short "$BENCH_REV")}" >build-bench/.bench-source
