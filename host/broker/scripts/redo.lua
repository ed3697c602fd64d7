-- SCRIPT_REDO (scripts.h): an outcome written again after its transaction's
-- reply was lost.
local stream, group, id = KEYS[1], ARGV[1], ARGV[2]
if #redis.call('XPENDING', stream, group, id, id, 1) == 0 then return 0 end
local i = 3
while i <= #ARGV do
  local n = tonumber(ARGV[i])
  redis.call(unpack(ARGV, i + 1, i + n))
  i = i + n + 1
end
return 1
