-- SCRIPT_RECLAIM (scripts.h): XAUTOCLAIM over several keys, with idle times and
-- delivery counts.
local group, consumer = ARGV[1], ARGV[2]
local min_idle, count = tonumber(ARGV[3]), tonumber(ARGV[4])
local cursors, streams, deleted = {}, {}, {}
-- XAUTOCLAIM takes one key: one call per key, each from its own cursor
-- (ARGV[5], ARGV[6], ... in KEYS order).
for k, key in ipairs(KEYS) do
  local cursor = ARGV[4 + k]
  -- XAUTOCLAIM examines at most COUNT*10 entries from the cursor: their idle
  -- times, read first, cover every entry it can claim.
  local before = {}
  for _, p in ipairs(redis.call('XPENDING', key, group, 'IDLE', min_idle, cursor, '+',
                                count * 10)) do
    before[p[1]] = p
  end
  local r = redis.call('XAUTOCLAIM', key, group, consumer, min_idle, cursor, 'COUNT', count)
  local out = {}
  for _, e in ipairs(r[2]) do
    local p = before[e[1]]
    -- Turned idle between the two calls (7.0 reads the clock per call):
    -- its count after the claim, from the pending list itself.
    local n = p and p[4] + 1
    if not n then
      local now = redis.call('XPENDING', key, group, e[1], e[1], 1)[1]
      n = now and now[4] or 1
    end
    out[#out + 1] = {e[1], e[2], p and p[3] or min_idle, n}
  end
  cursors[k] = r[1]
  if #out > 0 then streams[#streams + 1] = {key, out} end
  for _, id in ipairs(r[3]) do deleted[#deleted + 1] = {key, id} end
end
return {cursors, streams, deleted}
