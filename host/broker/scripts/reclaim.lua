-- SCRIPT_RECLAIM (scripts.h): XAUTOCLAIM over several keys, with idle times and
-- delivery counts.
local group, consumer = ARGV[1], ARGV[2]
local min_idle, count = tonumber(ARGV[3]), tonumber(ARGV[4])
-- The host's limits (SCRIPT_READ's), after the other arguments; none when absent.
local max_body = tonumber(ARGV[5 + #KEYS]) or math.huge
local max_entry = tonumber(ARGV[5 + #KEYS + 1]) or math.huge
local keep, keep_pairs = tonumber(ARGV[5 + #KEYS + 2]) or math.huge, tonumber(ARGV[5 + #KEYS + 3]) or math.huge
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
    out[#out + 1] = fit(e[1], e[2], p and p[3] or min_idle, n)
  end
  cursors[k] = r[1]
  if #out > 0 then streams[#streams + 1] = {key, out} end
  for _, id in ipairs(r[3]) do deleted[#deleted + 1] = {key, id} end
end
return {cursors, streams, deleted}
