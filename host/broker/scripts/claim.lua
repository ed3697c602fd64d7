-- SCRIPT_CLAIM (scripts.h): Redis 8.4's claiming read for older servers.
local group, consumer = ARGV[1], ARGV[2]
local min_idle, count = tonumber(ARGV[3]), tonumber(ARGV[4])
-- The host's limits (SCRIPT_READ's), after the other arguments; none when absent.
local max_body = tonumber(ARGV[5]) or math.huge
local max_entry = tonumber(ARGV[5 + 1]) or math.huge
local keep, keep_pairs = tonumber(ARGV[5 + 2]) or math.huge, tonumber(ARGV[5 + 3]) or math.huge
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
local streams, deleted, cursors = {}, {}, {}
-- Each key on its own, COUNT per key, as XREADGROUP CLAIM does.
for _, key in ipairs(KEYS) do
  cursors[#cursors + 1] = '0-0'
  local out = {}
  -- XPENDING lists by id; look at more than COUNT to find the longest idle.
  local idle = redis.call('XPENDING', key, group, 'IDLE', min_idle, '-', '+', count * 10)
  if #idle > 0 then
    for i, p in ipairs(idle) do p[5] = i end
    table.sort(idle, function(a, b)
      if a[3] ~= b[3] then return a[3] > b[3] end
      return a[5] < b[5]
    end)
    local ids, info = {}, {}
    for i = 1, math.min(count, #idle) do ids[i] = idle[i][1]; info[ids[i]] = idle[i] end
    -- In chunks: Lua's unpack fails above ~8000 values, and COUNT can be more.
    local got = {}
    for from = 1, #ids, 500 do
      local claimed = redis.call('XCLAIM', key, group, consumer, min_idle,
                                 unpack(ids, from, math.min(from + 499, #ids)))
      for _, e in ipairs(claimed) do
        local p = info[e[1]]
        got[e[1]] = true
        out[#out + 1] = fit(e[1], e[2], p[3], p[4])
      end
    end
    -- XCLAIM drops ids no longer in the stream from the PEL without a word.
    for _, id in ipairs(ids) do
      if not got[id] then deleted[#deleted + 1] = {key, id} end
    end
  end
  if #out < count then
    local r = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', count - #out,
                         'STREAMS', key, '>')
    if r then for _, e in ipairs(r[1][2]) do out[#out + 1] = fit(e[1], e[2], 0, 0) end end
  end
  if #out > 0 then streams[#streams + 1] = {key, out} end
end
return {cursors, streams, deleted}
