-- SCRIPT_HANDBACK (scripts.h): give back entries a stopping consumer holds
-- and will not finish.
local group, consumer, started = ARGV[1], ARGV[2], ARGV[3] == '1'
local at = 4
local given = {}
for k, key in ipairs(KEYS) do
  local n = tonumber(ARGV[at])
  at = at + 1
  given[k] = 0
  for i = at, at + n - 1 do
    -- Only an id still this consumer's: another may have claimed it meanwhile.
    local p = redis.call('XPENDING', key, group, ARGV[i], ARGV[i], 1, consumer)
    if #p == 1 then
      -- Idle since the epoch, so any claiming or reclaim read takes it now.
      -- (TIME rather than IDLE: an IDLE above the current time is clamped,
      -- not claimable.) An entry read and never started gets the delivery it
      -- never ran taken off its count; one whose handler was abandoned ran.
      local count = p[1][4]
      if not started then count = math.max(count - 1, 0) end
      redis.call('XCLAIM', key, group, consumer, 0, ARGV[i], 'TIME', 1,
                 'RETRYCOUNT', count, 'JUSTID')
      given[k] = given[k] + 1
    end
  end
  at = at + n
end
return given
