-- SCRIPT_HEARTBEAT (scripts.h): keep the claim of a consumer on the entries it holds.
-- Its cost is that of the XCLAIM of the ids kept (a few microseconds each):
-- the checks are one XPENDING over the ids' range and one XINFO STREAM per
-- key, not two commands per id.
local group, consumer = ARGV[1], ARGV[2]
local find, sub = string.find, string.sub

-- a < b for ids as Redis writes them ("ms-seq", no leading zeros).
local function less(a, b)
  local ad, bd = find(a, '-', 1, true), find(b, '-', 1, true)
  if ad ~= bd then return ad < bd end -- ms parts of different lengths
  if #a == #b or sub(a, 1, ad) ~= sub(b, 1, bd) then return a < b end
  return #a < #b -- the same ms: the shorter seq
end

-- Of ids[from..to] (ascending), those pending for this consumer, in order.
-- Pages of XPENDING over their range, each from the next id not yet
-- settled (skipping this consumer's other pending entries); past a budget
-- of entries looked at (many pending here and not held), one XPENDING per
-- id left. Only an id XPENDING returned for this consumer is kept, so ids
-- out of order are at worst missed, never taken from another consumer.
local function pending_mine(key, ids, from, to)
  local mine = {}
  local i, budget = from, 2 * (to - from + 1) + 100
  while i <= to and budget > 0 do
    local count = to - i + 1
    local page = redis.call('XPENDING', key, group, ids[i], ids[to], count, consumer)
    budget = budget - #page
    for _, p in ipairs(page) do
      local id = p[1]
      while i <= to and ids[i] ~= id and less(ids[i], id) do i = i + 1 end
      if ids[i] == id then
        mine[#mine + 1] = id
        i = i + 1
      end
    end
    if #page < count then i = to + 1 end -- the range holds no more of ours
  end
  for j = i, to do
    if #redis.call('XPENDING', key, group, ids[j], ids[j], 1, consumer) == 1 then mine[#mine + 1] = ids[j] end
  end
  return mine
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

local at = 3
local stamped = {}
for k, key in ipairs(KEYS) do
  local n = tonumber(ARGV[at])
  at = at + 1
  local ids = {}
  for i = at, at + n - 1 do ids[#ids + 1] = ARGV[i] end
  at = at + n
  -- Only the ids still pending for this consumer: another consumer may have
  -- claimed one while this host was paused, and it must keep it.
  local mine = n > 0 and pending_mine(key, ids, 1, n) or {}
  -- Nor an id deleted from the stream since it was read (XDEL, MAXLEN, a
  -- trim): XCLAIM would drop it from the pending list, and its outcome
  -- would then find nothing to acknowledge.
  local keep = {}
  if #mine > 0 then
    local present = in_stream(key)
    for _, id in ipairs(mine) do
      if present(id) then keep[#keep + 1] = id end
    end
  end
  -- XCLAIM to itself with JUSTID: idle 0, the delivery count as it was. (The
  -- ids go last in the argument table: unpack in the middle of a call's
  -- arguments gives one value.)
  for i = 1, #keep, 1000 do
    local args = {key, group, consumer, 0}
    for j = i, math.min(i + 999, #keep) do args[#args + 1] = keep[j] end
    args[#args + 1] = 'JUSTID'
    redis.call('XCLAIM', unpack(args))
  end
  stamped[k] = #keep
end
return stamped
