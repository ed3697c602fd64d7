-- SCRIPT_PRUNE (scripts.h): remove idle consumers with nothing pending and no live lease.
local group, idle, prefix = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local removed = {}
for _, key in ipairs(KEYS) do
  local cs = redis.pcall('XINFO', 'CONSUMERS', key, group)
  if cs.err then
    -- A key or group that does not exist has no consumer to remove.
    if cs.err ~= 'ERR no such key' and string.sub(cs.err, 1, 8) ~= 'NOGROUP ' then
      return cs
    end
    cs = {}
  end
  for _, c in ipairs(cs) do
    local f = {}
    for i = 1, #c, 2 do f[c[i]] = c[i + 1] end
    -- pending counts this key only: DELCONSUMER drops this key's entries of
    -- the consumer, none, and never touches the other key's.
    if f.pending == 0 and f.idle >= idle and redis.call('EXISTS', prefix .. f.name) == 0 then
      redis.call('XGROUP', 'DELCONSUMER', key, group, f.name)
      removed[#removed + 1] = {key, f.name}
    end
  end
end
return removed
