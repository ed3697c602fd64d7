-- SCRIPT_RATE (scripts.h): GCRA, the generic cell rate algorithm, on the
-- server's clock (TIME): permits of one limiter, taken in chunks. The one
-- copy of the rule: the handler fields rate and rate_per_key (the host's
-- consumer/permits.c) and ls.rate.take (lua/luastream/rate.lua, through
-- luastream.core's rate_script) both send this text.
--
-- KEYS[1]: the limiter's key, holding the theoretical arrival time of the
-- next permit (us); it expires once the limiter is idle again.
-- ARGV: the emission interval (us per permit), the tolerance (burst x
-- interval, us), how many permits are wanted, and the fewest worth a grant.
-- Returns {granted, ms to wait before the fewest are free (when none was
-- granted), how many are still free}.
local t, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local want, least = tonumber(ARGV[3]), tonumber(ARGV[4])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or 0) or 0
if tat < now then tat = now end
local room = math.floor((now + limit - tat) / t + 1e-9)
if room < least then
  return {0, math.max(1, math.ceil((tat + least * t - limit - now) / 1000))}
end
local n = math.min(want, room)
tat = tat + n * t
redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000) + 1)
return {n, 0, room - n}
