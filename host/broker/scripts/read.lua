-- SCRIPT_READ (scripts.h): a `new` subscription's read of `>` after a
-- reply too large, without blocking, that never sends an entry too large
-- for the host whole.
local group, consumer, count = ARGV[1], ARGV[2], tonumber(ARGV[3])
local max_body, max_entry = tonumber(ARGV[4]), tonumber(ARGV[5])
local keep, keep_pairs = tonumber(ARGV[6]), tonumber(ARGV[7])
local r = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', count,
                     'STREAMS', KEYS[1], KEYS[2], '>', '>')
if not r then return false end
for _, s in ipairs(r) do
  local entries = s[2]
  for i, e in ipairs(entries) do
    local f, body, size = e[2], 0, 0
    for j = 1, #f - 1, 2 do
      size = size + #f[j] + #f[j + 1] + 64 -- ENTRY_PAIR_COST (entry.h)
      if f[j] == 'data' and #f[j + 1] > body then body = #f[j + 1] end
    end
    if body > max_body or size > max_entry then
      -- Cut: its first keep_pairs fields, each name and value to keep bytes,
      -- and the sizes it had, in a third element the host reads as "cut".
      local cut = {}
      for j = 1, math.min(#f, 2 * keep_pairs) do cut[j] = string.sub(f[j], 1, keep) end
      entries[i] = {e[1], cut, {body, size}}
    end
  end
end
return r
