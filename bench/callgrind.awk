# callgrind.awk: figures from one callgrind profile, for bench/instructions.
#
#   callgrind_annotate --tree=caller --threshold=100 FILE | awk -f callgrind.awk
#
# Prints `key value` lines:
#   total N                      instructions collected (PROGRAM TOTALS)
#   server N                     instructions of the simulated Redis: every call
#                                from outside into the in-memory server's command
#                                code (host/memredis/: the cmd_*.c files, args,
#                                db, stream, group, zset, script, and
#                                broker_memory.c's run/check/lookup/exec_multi),
#                                with all it calls (reply building included)
#   client N                     instructions of cmd_free called from outside
#                                the server: the broker seam's client half
#                                freeing a command and its reply tree (the
#                                copying in, mem_command, is called through a
#                                pointer and shows no callers here:
#                                bench/instructions adds it from the inclusive
#                                listing)
#   alloc.host N                 malloc/calloc/realloc calls made by anything but
#                                the in-memory broker and the Lua states' pools
#                                (luastream's C code, cjson, libc helpers they call)
#   alloc.broker N               the same calls made by the in-memory broker
#                                (server and its client half: argv copies, replies)
#   alloc.lua N                  blocks the Lua states take from their pools
#                                (runtime/lmem.c's take; LuaJIT's own allocator,
#                                lj_alloc_malloc/realloc, for other states):
#                                GC objects, not C allocations
#   allocby CALLER N             malloc-family calls per caller
# A caller line of --tree=caller reads `COST (PCT)  < FILE:FN (Nx) [OBJ]`, the
# function's own line `COST (PCT)  *  FILE:FN [OBJ]`.

function strip_rec(name) { sub(/'[0-9]+$/, "", name); return name }

function is_server(name) {
  name = strip_rec(name)
  if (name ~ /host\/memredis\/(cmd_[a-z]+|args|db|stream|group|zset|script)\.c:/) return 1
  # the same before host/ had layer folders (BENCH_REV of an older commit)
  if (name ~ /host\/mem(stream|group|read|script|zset)\.c:/) return 1
  if (name ~ /host\/(memredis\/)?broker_memory\.c:(run|check|lookup|exec_multi|cmd_ping|cmd_info|word_is|arity_ok|script_call)$/) return 1
  return 0
}

function is_client(name) { return strip_rec(name) ~ /host\/(memredis\/)?broker_memory\.c:cmd_free$/ }

function is_broker(name) { return strip_rec(name) ~ /host\/(memredis\/(broker_memory|memreply|cmd_[a-z]+|args|db|stream|group|zset|script)|broker_memory|mem[a-z]*)\.c:/ }

function num(s) { gsub(/,/, "", s); return s + 0 }

# "  1,234 ( 5.6%)  < file:fn (12x) [obj]" -> caller name, count, cost
/^ *[0-9,]+ +\( *[0-9.]+%\) +< / {
  cost = $1
  line = $0
  sub(/^[^<]*< /, "", line)
  cnt = line
  sub(/^.* \(/, "", cnt)
  sub(/x\).*$/, "", cnt)
  name = line
  sub(/ \([0-9,]+x\).*$/, "", name)
  caller[n] = name
  ccount[n] = num(cnt)
  ccost[n] = num(cost)
  n++
  next
}

/^ *[0-9,]+ +\( *[0-9.]+%\) +\* / {
  cost = $1
  line = $0
  sub(/^[^*]*\*  /, "", line)

  sub(/ \[[^]]*\]$/, "", line)
  callee = line
  base = strip_rec(callee)
  if (is_server(callee)) {
    for (i = 0; i < n; i++) if (!is_server(caller[i])) server += ccost[i]
  }
  if (is_client(callee)) {
    for (i = 0; i < n; i++) if (!is_server(caller[i]) && !is_client(caller[i])) client += ccost[i]
  }
  if (base ~ /malloc\.c:(malloc|calloc|realloc)$/) {
    for (i = 0; i < n; i++) {
      if (caller[i] ~ /malloc\.c:/) continue # libc's own (realloc calling malloc)
      if (caller[i] ~ /host\/(runtime\/lmem|lua_memory)\.c:/) continue # a Lua state's pool: alloc.lua
      if (is_broker(caller[i])) abroker += ccount[i]
      else ahost += ccount[i]
      allocby[strip_rec(caller[i])] += ccount[i]
    }
  }
  if (base ~ /:lj_alloc_(malloc|realloc)$/ || base ~ /host\/(runtime\/lmem|lua_memory)\.c:take$/) {
    for (i = 0; i < n; i++) alua += ccount[i]
  }
  n = 0
  next
}

/PROGRAM TOTALS/ { total = num($1) }

/^$/ { n = 0 }

END {
  printf "total %d\nserver %d\nclient %d\nalloc.host %d\nalloc.broker %d\nalloc.lua %d\n", total, server, client, ahost, abroker, alua
  for (c in allocby) printf "allocby %s %d\n", c, allocby[c]
}
