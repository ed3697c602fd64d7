-- SCRIPT_LAG (scripts.h): how long a group's oldest waiting entries have waited.
local group = ARGV[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- now minus the millisecond part of id, never below 0 (an id set ahead of
-- the server's clock); a part beyond 2^53 is ahead of any clock anyway.
local function age(id)
  if not id then return 0 end
  local ms = tonumber(string.match(id, '^(%d+)%-'))
  if ms == nil or ms >= now then return 0 end
  return now - ms
end

local MAX_ID = '18446744073709551615-18446744073709551615'
local out = {}
for k, key in ipairs(KEYS) do
  out[k] = {}
  local groups = redis.pcall('XINFO', 'GROUPS', key)
  if groups.err then
    -- A key that does not exist has no group; anything else is a fault to see.
    if groups.err ~= 'ERR no such key' then return groups end
    groups = {}
  end
  for _, g in ipairs(groups) do
    local f = {}
    for i = 1, #g - 1, 2 do f[g[i]] = g[i + 1] end
    if f.name == group then
      -- The entry right after last-delivered-id, as the stream holds it now:
      -- deleted and trimmed entries are skipped, which XINFO's lag cannot do.
      local next_id = false
      if f['last-delivered-id'] ~= MAX_ID then
        local e = redis.call('XRANGE', key, '(' .. f['last-delivered-id'], '+', 'COUNT', 1)[1]
        if e then next_id = e[1] end
      end
      -- The smallest pending id: its age, not its idle time, which every
      -- delivery and heartbeat resets.
      local oldest = false
      if f.pending > 0 then oldest = redis.call('XPENDING', key, group)[2] end
      out[k] = {age(next_id), age(oldest), next_id or '', oldest or ''}
    end
  end
end
return out
