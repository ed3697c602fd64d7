-- SCRIPT_HEARTBEAT (scripts.h): keep the claim of a consumer on the entries it holds.
-- Its cost is mostly that of the XCLAIM of the ids kept (a few microseconds
-- each): the checks are XPENDING over the ids' range, 1,000 a page, and one
-- XINFO STREAM per key, not two commands per id; no table holds more than
-- 1,000 ids.
local group, consumer = ARGV[1], ARGV[2]
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
-- for this consumer and still in the stream; returns how many.
local function keep(key, from, to)
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

local at = 3
local stamped = {}
for k, key in ipairs(KEYS) do
  local n = tonumber(ARGV[at])
  stamped[k] = n > 0 and keep(key, at + 1, at + n) or 0
  at = at + 1 + n
end
return stamped
