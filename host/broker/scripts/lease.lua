-- SCRIPT_LEASE (scripts.h): take, steal or drop a consumer lease (renewals:
-- SCRIPT_KEEPALIVE).
local key, op, value, ttl = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
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
