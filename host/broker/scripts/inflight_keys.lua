-- SCRIPT_INFLIGHT_KEYS (scripts.h): one reader's call to the per-key
-- semaphores of max_in_flight_per_key, for every key it has something to
-- do for: per key (KEYS[i], a sorted set: member "<holder>#<n>", score when
-- its lease ends on the server's TIME), slots released, renewed and wanted.
-- Lapsed slots (a host that died or stalled past the lease) are dropped
-- first; a wanted member already held (a call sent again after its answer
-- was lost) is granted again, not counted twice. A key goes with its last
-- slot (ZREM of the last member deletes it), else it expires with its
-- longest lease.
-- ARGV: max ttl_ms, then per key: nrelease nrenew nwant members...
-- Returns per key {renewed, granted}: renewed per member 1, 2 (lapsed and
-- taken again) or 0 (lapsed, the key is full); granted per member 1 or 0.
local max, ttl = tonumber(ARGV[1]), tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expiry = now + ttl
local at, out = 3, {}

for k, key in ipairs(KEYS) do
  local nrelease, nrenew, nwant = tonumber(ARGV[at]), tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2])
  at = at + 3
  local old = redis.call('ZRANGEBYSCORE', key, '-inf', now)
  for i = 1, #old, 1000 do
    redis.call('ZREM', key, unpack(old, i, math.min(i + 999, #old)))
  end
  local held, count = {}, 0
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', key, '-inf', '+inf')) do
    held[m] = true
    count = count + 1
  end
  for _ = 1, nrelease do
    local m = ARGV[at]
    at = at + 1
    if held[m] then
      redis.call('ZREM', key, m)
      held[m] = nil
      count = count - 1
    end
  end
  local renewed, granted = {}, {}
  for i = 1, nrenew + nwant do
    local m = ARGV[at]
    at = at + 1
    local flag
    if held[m] then
      redis.call('ZADD', key, expiry, m)
      flag = 1
    elseif count < max then
      redis.call('ZADD', key, expiry, m)
      held[m] = true
      count = count + 1
      flag = i <= nrenew and 2 or 1
    else
      flag = 0
    end
    if i <= nrenew then renewed[i] = flag else granted[i - nrenew] = flag end
  end
  if count > 0 then redis.call('PEXPIRE', key, ttl) end
  out[k] = {renewed, granted}
end
return out
