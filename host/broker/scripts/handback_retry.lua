-- SCRIPT_HANDBACK_RETRY (scripts.h): give back, through the group's retry
-- stream, entries a stopping `new` consumer holds and will not finish.
local group, consumer = ARGV[1], ARGV[2]
local retry = KEYS[2]
local MAX_ARGS = 7000 -- unpack stops near 8000 values: such an entry stays pending
local given, i, nargs = 0, 3, #ARGV
while i <= nargs do
  local key, id, n = KEYS[tonumber(ARGV[i])], ARGV[i + 1], tonumber(ARGV[i + 2])
  local first = i + 3
  i = first + n
  -- Only an id still this consumer's (another may have claimed it
  -- meanwhile) and still in its stream (a deleted entry is not brought
  -- back). The copy and the ack go together: nothing lost, nothing twice.
  if n <= MAX_ARGS and #redis.call('XPENDING', key, group, id, id, 1, consumer) == 1 and
      #redis.call('XRANGE', key, id, id) == 1 then
    redis.call('XADD', retry, '*', unpack(ARGV, first, i - 1))
    redis.call('XACK', key, group, id)
    given = given + 1
  end
end
return given
