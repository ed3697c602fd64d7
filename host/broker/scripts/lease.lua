-- SCRIPT_LEASE (scripts.h): take, steal, renew or drop a consumer lease.
local key, op, value, ttl = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
if op == 'renew' then
  -- every lease of KEYS (one process's, in one slot) at once
  local out = {}
  for i, k in ipairs(KEYS) do
    local cur = redis.call('GET', k)
    if cur == value then
      redis.call('PEXPIRE', k, ttl)
      out[i] = 1
    elseif not cur then
      redis.call('SET', k, value, 'PX', ttl)
      out[i] = 2
    else
      out[i] = cur
    end
  end
  return out
end
local cur = redis.call('GET', key)
if op == 'drop' then
  if cur == value then redis.call('DEL', key) return {1} end
  return {0, cur or '', -2}
end
if not cur or cur == value or (op == 'steal' and cur == ARGV[4]) then
  redis.call('SET', key, value, 'PX', ttl)
  return {1}
end
return {0, cur, redis.call('PTTL', key)}
