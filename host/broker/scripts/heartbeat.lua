-- SCRIPT_HEARTBEAT (scripts.h): keep the claim of a consumer on the entries it holds.
local group, consumer = ARGV[1], ARGV[2]
local at = 3
local stamped = {}
for k, key in ipairs(KEYS) do
  local n = tonumber(ARGV[at])
  at = at + 1
  -- Only the ids still pending for this consumer: another consumer may have
  -- claimed one while this host was paused, and it must keep it.
  -- Nor an id deleted from the stream since it was read (XDEL, MAXLEN, a
  -- trim): XCLAIM would drop it from the pending list, and its outcome
  -- would then find nothing to acknowledge.
  local mine = {}
  for i = at, at + n - 1 do
    if #redis.call('XPENDING', key, group, ARGV[i], ARGV[i], 1, consumer) == 1 and
        #redis.call('XRANGE', key, ARGV[i], ARGV[i]) == 1 then
      mine[#mine + 1] = ARGV[i]
    end
  end
  at = at + n
  -- XCLAIM to itself with JUSTID: idle 0, the delivery count as it was. (The
  -- ids go last in the argument table: unpack in the middle of a call's
  -- arguments gives one value.)
  for i = 1, #mine, 1000 do
    local args = {key, group, consumer, 0}
    for j = i, math.min(i + 999, #mine) do args[#args + 1] = mine[j] end
    args[#args + 1] = 'JUSTID'
    redis.call('XCLAIM', unpack(args))
  end
  stamped[k] = #mine
end
return stamped
