-- SCRIPT_OWN (scripts.h): the history read of a `new` subscription, with idle
-- times and delivery counts.
local group, consumer, count = ARGV[1], ARGV[2], tonumber(ARGV[3])
-- The host's limits (SCRIPT_READ's), after the other arguments; none when absent.
local max_body = tonumber(ARGV[4 + #KEYS]) or math.huge
local max_entry = tonumber(ARGV[4 + #KEYS + 1]) or math.huge
local keep, keep_pairs = tonumber(ARGV[4 + #KEYS + 2]) or math.huge, tonumber(ARGV[4 + #KEYS + 3]) or math.huge
-- The entry as the host gets it: an entry over max_body (its `data`) or
-- max_entry (its names and values in all, 64 more a field) cut to its first keep_pairs
-- fields of at most keep bytes each, with the sizes it had after the rest.
local function fit(id, f, idle, deliveries)
  local body, size = 0, 0
  for j = 1, #f - 1, 2 do
    size = size + #f[j] + #f[j + 1] + 64 -- ENTRY_PAIR_COST (entry.h)
    if f[j] == 'data' and #f[j + 1] > body then body = #f[j + 1] end
  end
  if body <= max_body and size <= max_entry then return {id, f, idle, deliveries} end
  local cut = {}
  for j = 1, math.min(#f, 2 * keep_pairs) do cut[j] = string.sub(f[j], 1, keep) end
  return {id, cut, idle, deliveries, {body, size}}
end
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
      out[#out + 1] = fit(e[1], e[2], p and p[3] or 0, p and p[4] or 0)
    end
  end
  cursors[k] = cursor
  if #out > 0 then streams[#streams + 1] = {key, out} end
end
return {cursors, streams, {}}
