-- SCRIPT_KEEPALIVE (scripts.h): one process's call for one slot: renew its
-- consumer leases, and keep each rider's (a heartbeat's) claim on the entries
-- its consumer holds.
-- A heartbeat's cost is mostly that of the XCLAIM of the ids kept (a few
-- microseconds each): the checks are XPENDING over the ids' range, 1,000 a
-- page, and one XINFO STREAM per key, not two commands per id; no table
-- holds more than 1,000 ids.
local value, ttl = ARGV[1], ARGV[2]
local nleases, nriders = tonumber(ARGV[3]), tonumber(ARGV[4])
local find, sub = string.find, string.sub
local PAGE = 1000

-- a < b for ids as Redis writes them ("ms-seq", no leading zeros).
local function less(a, b)
  local ad, bd = find(a, '-', 1, true), find(b, '-', 1, true)
  if ad ~= bd then return ad < bd end -- ms parts of different lengths
  if #a == #b or sub(a, 1, ad) ~= sub(b, 1, bd) then return a < b end
  return #a < #b -- the same ms: the shorter seq
end

-- A function telling whether an id read from the stream is still in it:
-- not before its first entry, and (when some entry at or after that was
-- deleted) not deleted, which only XRANGE tells for an id at or below the
-- highest id ever deleted. XDEL, XDELEX and XACKDEL raise that mark;
-- trimming removes only ids below the first entry. Without the two (Redis
-- before 7.0, or a user not allowed XINFO STREAM), XRANGE for every id.
local function in_stream(key)
  local info = redis.pcall('XINFO', 'STREAM', key)
  local first, deleted
  if info.err == nil then
    for i = 1, #info, 2 do
      if info[i] == 'recorded-first-entry-id' then first = info[i + 1] end
      if info[i] == 'max-deleted-entry-id' then deleted = info[i + 1] end
      if info[i] == 'length' and info[i + 1] == 0 then return function() return false end end
    end
  end
  if first == nil or deleted == nil then
    return function(id) return #redis.call('XRANGE', key, id, id) == 1 end
  end
  local check = not less(deleted, first)
  return function(id)
    if less(id, first) then return false end
    if check and not less(deleted, id) then return #redis.call('XRANGE', key, id, id) == 1 end
    return true
  end
end

-- Re-stamps, of ARGV[from..to] (ids of key, ascending), those still pending
-- for consumer and still in the stream; returns how many.
local function keep(key, group, consumer, from, to)
  local present, args, stamped = nil, nil, 0
  local function flush()
    if args == nil then return end
    -- XCLAIM to itself with JUSTID: idle 0, the delivery count as it was.
    -- (The ids go last in the argument table: unpack in the middle of a
    -- call's arguments gives one value.)
    args[#args + 1] = 'JUSTID'
    redis.call('XCLAIM', unpack(args))
    args = nil
  end
  -- Nor an id deleted from the stream since it was read (XDEL, MAXLEN, a
  -- trim): XCLAIM would drop it from the pending list, and its outcome
  -- would then find nothing to acknowledge.
  local function mine(id)
    present = present or in_stream(key)
    if not present(id) then return end
    args = args or {key, group, consumer, 0}
    args[#args + 1] = id
    stamped = stamped + 1
    if #args == 4 + PAGE then flush() end
  end
  -- Only the ids still pending for this consumer: another consumer may have
  -- claimed one while this host was paused, and it must keep it. Pages of
  -- XPENDING for this consumer over the ids' range, each from the next id
  -- not yet settled (skipping its other pending entries); past a budget of
  -- entries looked at (many pending here and not held), one XPENDING per id
  -- left. Only an id XPENDING returned for this consumer is re-stamped, so
  -- ids out of order are at worst missed, never taken from another.
  local i, budget = from, 2 * (to - from + 1) + 100
  while i <= to and budget > 0 do
    local count = math.min(to - i + 1, PAGE)
    local page = redis.call('XPENDING', key, group, ARGV[i], ARGV[to], count, consumer)
    budget = budget - #page
    for _, p in ipairs(page) do
      local id = p[1]
      while i <= to and ARGV[i] ~= id and less(ARGV[i], id) do i = i + 1 end
      if i <= to and ARGV[i] == id then
        mine(id)
        i = i + 1
      end
    end
    if #page < count then i = to + 1 end -- the range holds no more of ours
  end
  for j = i, to do
    if #redis.call('XPENDING', key, group, ARGV[j], ARGV[j], 1, consumer) == 1 then mine(ARGV[j]) end
  end
  flush()
  return stamped
end

-- Renewals: every lease key (KEYS[1..nleases]) extended when it holds value,
-- taken again when it is gone; 1, 2, or the other holder's value each.
local renewed = {}
for i = 1, nleases do
  local k = KEYS[i]
  local cur = redis.call('GET', k)
  if cur == value then
    redis.call('PEXPIRE', k, ttl)
    renewed[i] = 1
  elseif not cur then
    redis.call('SET', k, value, 'PX', ttl)
    renewed[i] = 2
  else
    renewed[i] = cur
  end
end

-- A rider's section, from ARGV[at]: leased ("1": its first key is its lease
-- key) group consumer nkeys (count id...)-per-key, its keys from KEYS[key].
-- Returns the count re-stamped per key, and where the next section starts.
local function ride(at, key)
  local leased, group, consumer, nkeys = ARGV[at], ARGV[at + 1], ARGV[at + 2], tonumber(ARGV[at + 3])
  at = at + 4
  local lease_key = leased == '1' and KEYS[key] or nil
  if lease_key then key = key + 1 end
  local sections, skip = {}, at
  for k = 1, nkeys do
    local n = tonumber(ARGV[skip])
    sections[k] = {skip + 1, skip + n}
    skip = skip + 1 + n
  end
  local next_at, next_key = skip, key + nkeys
  -- Only while its consumer name is this process's: after a pause past the
  -- lease, the name's new holder owns those entries (same name: the owner
  -- check of XPENDING cannot tell).
  if lease_key and redis.call('GET', lease_key) ~= value then
    return 'the consumer lease is not this process\'s', next_at, next_key
  end
  local stamped = {}
  for k = 1, nkeys do
    local from, to = sections[k][1], sections[k][2]
    stamped[k] = to >= from and keep(KEYS[key + k - 1], group, consumer, from, to) or 0
  end
  return stamped, next_at, next_key
end

-- A pause section (pause.h), from ARGV[at]: 'p' prober probe_ms, its key the
-- group's pause key (SCRIPT_PAUSE writes it; no lease key: a partition's
-- lease is in another slot than its group's pause). Returns
-- {state, reason, ms left (-1: until resumed, or while a probe runs
-- elsewhere), kind, by, trips}, state 'run', 'pause', or 'probe': the
-- breaker's pause is over and this prober holds the one probe (for probe_ms
-- after its last look: a prober that stopped looking hands it on). An empty
-- prober only looks: it never takes the probe.
local now_ms
local function look(at, key)
  local pkey, prober, probe_ms = KEYS[key], ARGV[at + 1], tonumber(ARGV[at + 2])
  local h = redis.call('HMGET', pkey, 'kind', 'reason', 'until_ms', 'probe', 'probe_until_ms', 'by',
                       'trips')
  local kind, until_ms, probe = h[1], tonumber(h[3]), h[4]
  if not kind then return {'run'} end
  if not now_ms then
    local t = redis.call('TIME')
    now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  local function answer(state, left) return {state, h[2] or '', left, kind, h[6] or '', h[7] or '0'} end
  if until_ms == nil or now_ms < until_ms then return answer('pause', until_ms and until_ms - now_ms or -1) end
  if kind ~= 'breaker' then return {'run'} end -- an operator's pause that ended (expiring)
  if prober ~= '' and (probe == nil or probe == prober or now_ms >= (tonumber(h[5]) or 0)) then
    redis.call('HSET', pkey, 'probe', prober, 'probe_until_ms', now_ms + probe_ms)
    return answer('probe', 0)
  end
  return answer('pause', -1)
end

-- Each under pcall: one subscription's error (its group deleted, a command
-- its user may not run) leaves the renewals and the other riders alone. (A
-- key the user may not touch refuses the whole call before it runs: the
-- host then sends the renewals and each rider apart, lease.c send_apart.)
local riders, at, key = {}, 5, nleases + 1
for r = 1, nriders do
  local ok, out, next_at, next_key
  if ARGV[at] == 'p' then
    ok, out = pcall(look, at, key)
    next_at, next_key = at + 3, key + 1
    if not ok then out = type(out) == 'table' and (out.err or 'error') or tostring(out) end
  else
    ok, out, next_at, next_key = pcall(ride, at, key)
  end
  if not ok and ARGV[at] ~= 'p' then
    out = type(out) == 'table' and (out.err or 'error') or tostring(out)
    -- where the next one starts, without running it
    local nkeys = tonumber(ARGV[at + 3])
    next_at, next_key = at + 4, key + nkeys + (ARGV[at] == '1' and 1 or 0)
    for _ = 1, nkeys do next_at = next_at + 1 + tonumber(ARGV[next_at]) end
  end
  riders[r] = out
  at, key = next_at, next_key
end
return {renewed, riders}
