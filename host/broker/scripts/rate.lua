-- SCRIPT_RATE (scripts.h): GCRA, the generic cell rate algorithm, on the
-- server's clock (TIME): permits of rate limiters, taken in chunks. The one
-- copy of the rule: the handler fields rate and rate_per_key (the host's
-- consumer/permits.c and consumer/key_rate.c) and ls.rate.take
-- (lua/luastream/rate.lua, through luastream.core's rate_script) all send
-- this text.
--
-- KEYS: one limiter per key (rate_per_key asks for all its waiting keys in
-- one call), each holding the theoretical arrival time of its next permit
-- (us); a key expires once its limiter is idle again.
-- ARGV: the emission interval (us per permit), the tolerance (burst x
-- interval, us), then per key how many permits are wanted and the fewest
-- worth a grant.
-- Returns, per key in order: granted, ms to wait before the fewest are free
-- (when none was granted, else 0), how many are still free.
local t, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local out = {}
for i, key in ipairs(KEYS) do
  local want, least = tonumber(ARGV[1 + 2 * i]), tonumber(ARGV[2 + 2 * i])
  local tat = tonumber(redis.call('GET', key) or 0) or 0
  if tat < now then tat = now end
  local room = math.floor((now + limit - tat) / t + 1e-9)
  if room < least then
    out[#out + 1] = 0
    out[#out + 1] = math.max(1, math.ceil((tat + least * t - limit - now) / 1000))
    out[#out + 1] = room
  else
    local n = math.min(want, room)
    tat = tat + n * t
    redis.call('SET', key, string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000) + 1)
    out[#out + 1] = n
    out[#out + 1] = 0
    out[#out + 1] = room - n
  end
end
return out
