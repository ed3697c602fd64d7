-- SCRIPT_HEARTBEAT (scripts.h): keep the claim of a consumer on the entries it holds.
local group, consumer = ARGV[1], ARGV[2]
local at = 3
local stamped = {}
for k, key in ipairs(KEYS) do
  local n = tonumber(ARGV[at])
  at = at + 1
  -- Only the ids still pending for this consumer: another consumer may have
  -- claimed one while this host was paused, and it must keep it.
  local mine = {}
  for i = at, at + n - 1 do
    if #redis.call('XPENDING', key, group, ARGV[i], ARGV[i], 1, consumer) == 1 then
      mine[#mine + 1] = ARGV[i]
    end
  end
  at = at + n
  -- XCLAIM to itself with JUSTID: idle 0, the delivery count as it was.
  for i = 1, #mine, 1000 do
    redis.call('XCLAIM', key, group, consumer, 0, unpack(mine, i, math.min(i + 999, #mine)), 'JUSTID')
  end
  stamped[k] = #mine
end
return stamped
