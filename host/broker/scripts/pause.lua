-- SCRIPT_PAUSE (scripts.h): a group's pause, written by `luastream pause`
-- and `resume`, by a handler's ls.pause and by the breaker. Hosts read it
-- with their keepalive (keepalive.lua, a pause section).
-- KEYS[1]: the pause key (a hash). ARGV[1]: the operation.
local key, op = KEYS[1], ARGV[1]
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local HOUR = 3600000

if op == 'pause' then
  -- pause for_ms reason by: an operator's pause, until resumed (for_ms 0) or
  -- for for_ms; it replaces a breaker's.
  local for_ms, reason, by = tonumber(ARGV[2]), ARGV[3], ARGV[4]
  redis.call('DEL', key)
  redis.call('HSET', key, 'kind', 'manual', 'reason', reason, 'by', by, 'since_ms', now)
  if for_ms > 0 then
    redis.call('HSET', key, 'until_ms', now + for_ms)
    redis.call('PEXPIRE', key, for_ms)
    return {now, now + for_ms}
  end
  return {now, 0}
elseif op == 'resume' then
  return redis.call('DEL', key)
elseif op == 'trip' then
  -- trip prober want_ms cap_ms reason by: the breaker opens, unless the group
  -- is paused already (by an operator, or by a trip another host saw first:
  -- one transition, not one per entry). From its half-open state (its pause
  -- over) the host holding the probe, or any host while none does, opens it
  -- again for at least twice as long as the last time (backoff), capped.
  -- Returns {1, pause_ms, trips} when this call opened it, else {0, kind}.
  local prober, want, cap = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
  local kind, until_ms, probe, last, trips =
    unpack(redis.call('HMGET', key, 'kind', 'until_ms', 'probe', 'last_ms', 'trips'))
  if kind == 'manual' then return {0, kind} end
  trips = tonumber(trips) or 0
  if kind == 'breaker' then
    if now < (tonumber(until_ms) or 0) then return {0, kind} end
    if probe and probe ~= prober then return {0, kind} end
    want = math.max(want, 2 * (tonumber(last) or 0))
  else
    trips = 0
  end
  local ms = math.min(want, cap)
  redis.call('DEL', key)
  redis.call('HSET', key, 'kind', 'breaker', 'reason', ARGV[5], 'by', ARGV[6], 'since_ms', now,
             'until_ms', now + ms, 'last_ms', ms, 'trips', trips + 1)
  redis.call('PEXPIRE', key, ms + HOUR) -- a breaker nobody probes ends an hour after
  return {1, ms, trips + 1}
elseif op == 'close' then
  -- close prober: the probe succeeded; the breaker closes for every host.
  if redis.call('HGET', key, 'kind') == 'breaker' and redis.call('HGET', key, 'probe') == ARGV[2] then
    redis.call('DEL', key)
    return 1
  end
  return 0
end
return redis.error_reply('ERR pause: unknown operation ' .. tostring(op))
