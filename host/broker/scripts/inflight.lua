-- SCRIPT_INFLIGHT (scripts.h): one reader's call to a subscription's
-- fleet-wide semaphore (max_in_flight): releases, renewals and new slots in
-- one step. KEYS[1] holds the slots (a sorted set: member "<holder>#<n>",
-- score when its lease ends, on the server's TIME), KEYS[2] the readers
-- waiting for one (member "<place>|<holder>", score when it lapses; place:
-- 15 digits, the time it began waiting, or one past the last place taken).
-- ARGV: max ttl_ms wait_ttl_ms waiter holder nrelease nrenew nwant members...
-- (the ones released, then renewed, then wanted). A wanted member already
-- held (a call whose answer was lost, sent again) is granted again, not
-- counted twice: grants are idempotent. Free slots go first to the readers
-- that have waited longest, so a host that keeps finishing and asking again
-- cannot starve the others.
-- Returns {renewed, granted, waiter}: renewed per member 1 (renewed), 2 (it
-- had lapsed and was free: taken again) or 0 (lapsed, the cap is full);
-- granted per member 1 or 0; waiter: this reader's place in the queue, ""
-- when it waits for nothing.
local holders, waiters = KEYS[1], KEYS[2]
local max, ttl, wait_ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local waiter, holder = ARGV[4], ARGV[5]
local nrelease, nrenew, nwant = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- Slots and places whose lease ran out: a host that died or stalled past it.
local function drop_lapsed(key)
  local old = redis.call('ZRANGEBYSCORE', key, '-inf', now)
  for i = 1, #old, 1000 do
    redis.call('ZREM', key, unpack(old, i, math.min(i + 999, #old)))
  end
end
drop_lapsed(holders)
drop_lapsed(waiters)

-- The slots held now, as a set (ZRANGEBYSCORE rather than ZSCORE per
-- member: the commands the documented ACL already grants).
local held, count = {}, 0
for _, m in ipairs(redis.call('ZRANGEBYSCORE', holders, '-inf', '+inf')) do
  held[m] = true
  count = count + 1
end

local at = 9
for _ = 1, nrelease do
  local m = ARGV[at]
  at = at + 1
  if held[m] then
    redis.call('ZREM', holders, m)
    held[m] = nil
    count = count - 1
  end
end

local expiry = now + ttl
local renewed = {}
for i = 1, nrenew do
  local m = ARGV[at]
  at = at + 1
  if held[m] then
    redis.call('ZADD', holders, expiry, m)
    renewed[i] = 1
  elseif count < max then
    redis.call('ZADD', holders, expiry, m)
    held[m] = true
    count = count + 1
    renewed[i] = 2
  else
    renewed[i] = 0
  end
end

local granted, denied, last = {}, false, 0
local queue, mine = redis.call('ZRANGEBYSCORE', waiters, '-inf', '+inf'), false
for _, w in ipairs(queue) do mine = mine or w == waiter end
if nwant > 0 then
  -- Readers that began waiting before this one each keep one free slot.
  local ahead = 0
  for _, w in ipairs(queue) do
    if not mine or w < waiter then ahead = ahead + 1 end
    last = math.max(last, tonumber(string.sub(w, 1, 15)) or 0)
  end
  for i = 1, nwant do
    local m = ARGV[at]
    at = at + 1
    if held[m] then
      redis.call('ZADD', holders, expiry, m)
      granted[i] = 1
    elseif count + ahead < max then
      redis.call('ZADD', holders, expiry, m)
      held[m] = true
      count = count + 1
      granted[i] = 1
    else
      granted[i] = 0
      denied = true
    end
  end
end

if denied then
  -- A place behind every other, even one taken in the same millisecond.
  if not mine then waiter = string.format('%015.0f', math.max(now, last + 1)) .. '|' .. holder end
  redis.call('ZADD', waiters, now + wait_ttl, waiter)
  redis.call('PEXPIRE', waiters, wait_ttl)
else
  if mine then redis.call('ZREM', waiters, waiter) end
  waiter = ''
end
redis.call('PEXPIRE', holders, ttl)
return {renewed, granted, waiter}
