-- SCRIPT_TICK (scripts.h): a scheduled handler's ticks across the fleet, in
-- one hash per schedule, KEYS[1] = "luastream:tick:{NAME}", on the server's
-- TIME. A tick runs on the host holding the lease; its writes are applied
-- with its done mark, only while the tick is not done: once per tick however
-- often it ran (a host paused past its lease runs it again).
--
-- take TICK OWNER LEASE_MS [resume]: the lease for TICK (taken, or renewed
-- when OWNER holds it) -> {1, done}; {0, done} when a tick at or after TICK
-- is done, or with resume (a host starting) when no tick was ever done;
-- {-1, done, ms, running} when another owner holds the lease for ms more,
-- running the tick `running`; {-2, done, ms} when TICK is more than a second
-- ahead of the server's clock (the host's clock runs fast): not before ms.
-- done: the newest tick done (0: none).
--
-- done TICK OWNER OUTCOME ERROR NEXT RELEASE LEASE_MS NCMDS [argc arg...]...:
-- marks TICK done with its outcome ("ok" or "error", ERROR the message),
-- writing the NCMDS commands first, unless a tick at or after TICK is done
-- -> {0, "", mine}: mine 1 when TICK is the newest done and OWNER marked it
-- (this call sent again after its answer was lost: applied once, by the
-- first). Else {1, ""}, or {1, "c why"} when command c failed (the ones
-- after it are written still, as the outcome script does). NEXT (the next
-- tick) is kept for `luastream status`. RELEASE 1 gives the lease back, else
-- OWNER keeps it LEASE_MS more (the next tick of a catch-up).
local key, op, tick, owner = KEYS[1], ARGV[1], tonumber(ARGV[2]), ARGV[3]
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local done = tonumber(redis.call('HGET', key, 'done') or '0') or 0

if op == 'take' then
  if tick <= done or (ARGV[5] == 'resume' and done == 0) then return {0, done} end
  if tick > now + 1000 then return {-2, done, tick - now} end
  local holder = redis.call('HGET', key, 'owner')
  local until_ms = tonumber(redis.call('HGET', key, 'until') or '0') or 0
  if holder and holder ~= owner and until_ms > now then
    return {-1, done, until_ms - now, tonumber(redis.call('HGET', key, 'running') or '0') or 0}
  end
  redis.call('HSET', key, 'owner', owner, 'until', now + tonumber(ARGV[4]), 'running', tick)
  return {1, done}
end

if op ~= 'done' then return redis.error_reply('ERR unknown operation ' .. tostring(op)) end
if tick <= done then
  local mine = tick == done and redis.call('HGET', key, 'last_host') == owner
  return {0, '', mine and 1 or 0}
end
local outcome, err, next_tick, release, lease = ARGV[4], ARGV[5], ARGV[6], ARGV[7] == '1', tonumber(ARGV[8])
local ncmds, at, failed = tonumber(ARGV[9]), 10, ''
for c = 1, ncmds do
  local n = tonumber(ARGV[at])
  local w = redis.pcall(unpack(ARGV, at + 1, at + n))
  if failed == '' and type(w) == 'table' and w.err then failed = c .. ' ' .. w.err end
  at = at + n + 1
end
redis.call('HSET', key, 'done', tick, 'last_tick', tick, 'last_outcome', outcome, 'last_at', now,
  'last_host', owner, 'last_error', err, 'next', next_tick)
redis.call('HINCRBY', key, outcome == 'ok' and 'runs' or 'errors', 1)
if redis.call('HGET', key, 'owner') == owner then
  if release then
    redis.call('HDEL', key, 'owner', 'until', 'running')
  else
    redis.call('HSET', key, 'until', now + lease)
  end
end
return {1, failed}
