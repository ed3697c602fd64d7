-- SCRIPT_OWN (scripts.h): the history read of a `new` subscription, with idle
-- times and delivery counts.
local group, consumer, count = ARGV[1], ARGV[2], tonumber(ARGV[3])
local cursors, streams = {}, {}
for k, key in ipairs(KEYS) do
  local cursor = ARGV[3 + k]
  -- The same entries the history read gives (this consumer's, after the
  -- cursor, deleted ones too), before it counts this delivery.
  local before = {}
  for _, p in ipairs(redis.call('XPENDING', key, group, '(' .. cursor, '+', count,
                                consumer)) do
    before[p[1]] = p
  end
  local r = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', count,
                       'STREAMS', key, cursor)
  local out = {}
  for _, e in ipairs(r and r[1][2] or {}) do
    cursor = e[1]
    -- Deleted from the stream (fields nil): nothing to run, read past it.
    if e[2] then
      local p = before[e[1]]
      out[#out + 1] = {e[1], e[2], p and p[3] or 0, p and p[4] or 0}
    end
  end
  cursors[k] = cursor
  if #out > 0 then streams[#streams + 1] = {key, out} end
end
return {cursors, streams, {}}
