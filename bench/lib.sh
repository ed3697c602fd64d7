# bench/lib.sh: what bench/latency, bench/recovery and bench/memory share:
# a private redis-server on a free loopback port in a temp folder, stopping
# children, and what was measured. Sourced from the repository root after
# `set -euo pipefail`; callers set `name` (for messages) first.

say() { printf '%s: %s\n' "$name" "$*" >&2; }
die() { say "$*"; exit 1; }

# What build-bench/ was built from (bench/build.sh): a commit, or the working tree.
bench_source() {
  local rev
  rev=$(cat build-bench/.bench-source 2>/dev/null || true)
  if [ -n "$rev" ]; then echo "commit $rev"; else
    echo "working tree at $(git rev-parse --short HEAD)$(git diff --quiet -- host lua CMakeLists.txt || echo ' with changes')"; fi
}

now_ms() { date +%s%3N; }

# alive PID: running and not a zombie
alive() {
  local state
  state=$(sed -n 's/^[^)]*) \(.\).*/\1/p' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}

# stop PID...: SIGTERM, SIGKILL after 10 s, reaped.
stop() {
  local pid deadline
  for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
  deadline=$((SECONDS + 10))
  for pid in "$@"; do
    while alive "$pid" && [ $SECONDS -lt $deadline ]; do sleep 0.05; done
    alive "$pid" && { say "pid $pid ignored SIGTERM: killing it"; kill -KILL "$pid" 2>/dev/null || true; }
    wait "$pid" 2>/dev/null || true
  done
}

work="" redis_pid="" port="" children=() host_args=()

cleanup() {
  trap '' INT TERM
  [ ${#children[@]} -eq 0 ] || stop "${children[@]}"
  [ -z "$redis_pid" ] || stop "$redis_pid"
  [ -z "$work" ] || rm -rf "$work"
}

# start_redis: sets work, port, redis_pid, redis_version; cleans up on exit.
start_redis() {
  work=$(mktemp -d "${TMPDIR:-/tmp}/luastream-$name-XXXXXX")
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  port=$(luajit -e 'io.write(require("tests.integration.helper").free_port())')
  redis-server --port "$port" --bind 127.0.0.1 --dir "$work" --save "" --appendonly no \
    --daemonize no --logfile "$work/redis.log" &
  redis_pid=$!
  for _ in $(seq 200); do [ "$(rcli PING 2>/dev/null)" = PONG ] && break; sleep 0.05; done
  [ "$(rcli PING 2>/dev/null)" = PONG ] || { cat "$work/redis.log" >&2; die "redis-server did not start"; }
  redis_version=$(rcli INFO server | tr -d '\r' | sed -n 's/^redis_version://p')
  say "redis-server $redis_version on 127.0.0.1:$port"
}

rcli() { redis-cli -p "$port" "$@"; }

# pending STREAM GROUP: the group's pending count
pending() { rcli XPENDING "$1" "$2" | head -n 1; }

# wait_log FILE TEXT SECONDS: until FILE holds TEXT
wait_log() {
  local deadline=$((SECONDS + $3))
  until grep -q "$2" "$1" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || die "no '$2' in $1 within $3 s"
    sleep 0.02
  done
}

# start_host DIR LOG CONSUMER [ENV=VALUE...]: starts build-bench/luastream run
# on DIR in the background (appended to children) and waits for "host ready";
# sets host_pid. The options in the array host_args (when set) are added to
# the command line.
start_host() {
  local dir=$1 log=$2 consumer=$3
  shift 3
  env "$@" "${LUASTREAM_BIN:-build-bench/luastream}" run --log-level info --consumer "$consumer" \
    --redis "redis://127.0.0.1:$port" ${host_args[@]+"${host_args[@]}"} "$dir" 2>"$log" &
  host_pid=$!
  children+=("$host_pid")
  wait_log "$log" 'msg="host ready"' 30
}
