-- SCRIPT_SWEEP (scripts.h): due entries of a delay set onto the retry stream,
-- after trimming it.
local retry, group = KEYS[2], ARGV[3]
-- First the retry stream's trim, before this sweep adds anything to it:
-- what the sweep adds is after the group's last-delivered-id, kept.
local trimmed = 0
if redis.call('XLEN', retry) > 0 then
  -- ids compared exactly, as decimal strings (no leading zeros)
  local function before(a, b)
    local am, as = string.match(a, '^(%d+)-(%d+)$')
    local bm, bs = string.match(b, '^(%d+)-(%d+)$')
    if am ~= bm then return #am < #bm or (#am == #bm and am < bm) end
    return #as < #bs or (#as == #bs and as < bs)
  end
  -- The oldest entry still needed by any group on the key (the retry
  -- stream is this group's, but another may have been added to it): each
  -- group's oldest pending entry, or its first not yet delivered (normally
  -- after every pending one; not after XGROUP SETID moved it back).
  local keep, ours = nil, false
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', retry)) do
    local f = {}
    for i = 1, #g, 2 do f[g[i]] = g[i + 1] end
    if f.name == group then ours = true end
    local p = redis.call('XPENDING', retry, f.name)
    if p[1] > 0 and (not keep or before(p[2], keep)) then keep = p[2] end
    local nxt = redis.call('XRANGE', retry, '(' .. f['last-delivered-id'], '+', 'COUNT', 1)
    if #nxt > 0 and (not keep or before(nxt[1][1], keep)) then keep = nxt[1][1] end
  end
  -- Without this group nothing is known to be acknowledged: no trim.
  if ours then
    if keep then
      trimmed = redis.call('XTRIM', retry, 'MINID', keep)
    else
      trimmed = redis.call('XTRIM', retry, 'MAXLEN', 0)
    end
  end
end
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0,
                       tonumber(ARGV[2]))
local unreadable = 0
for k = 1, #due, 2 do
  local member = due[k]
  -- netstrings: the original id, then field, value, ...
  local parts, i = {}, 1
  while i <= #member do
    local _, colon, digits = string.find(member, '^(%d+):', i)
    local n = digits and tonumber(digits)
    if not n or colon + n > #member then parts = nil break end
    parts[#parts + 1] = string.sub(member, colon + 1, colon + n)
    i = colon + n + 1
  end
  if parts and #parts >= 3 and #parts % 2 == 1 then
    redis.call('XADD', retry, '*', unpack(parts, 2))
  else
    redis.call('ZADD', KEYS[3], due[k + 1], member)
    unreadable = unreadable + 1
  end
  redis.call('ZREM', KEYS[1], member)
end
-- When the next member is due (its score, Unix ms), -1 when none is left:
-- the host sweeps again then rather than on a fixed beat.
local first = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
local next_due = -1
if #first == 2 then
  next_due = tonumber(first[2]) or 0
  if next_due ~= next_due or next_due < 0 then next_due = 0 end -- nan, -inf, negative: now
  if next_due > 9e15 then next_due = 9e15 end -- inf: an integer all the same
end
return {#due / 2, unreadable, trimmed, next_due}
