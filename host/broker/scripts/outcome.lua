-- SCRIPT_OUTCOME (scripts.h): the outcomes of many entries of one key, each
-- written only while its entry is still pending, so never twice.
local key, group, consumer = KEYS[1], ARGV[1], ARGV[2]
local MAX_ARGS = 7000 -- unpack stops near 8000 values: refuse rather than fail the call

-- "-c why" when the ACL user may not run command c (c = 0: the XACK or
-- XPENDING), or nil: checked for every command of an entry before any of
-- them, or its ack, is written (on Redis 7.0 and later: older servers have
-- no redis.acl_check_cmd, and a refusal is then reported as it runs).
local acl_check_cmd = redis.acl_check_cmd -- Redis 7.0 and later

local function check(c, ...)
  if not acl_check_cmd then return nil end
  local ok, allowed = pcall(acl_check_cmd, ...)
  if not ok then return '-' .. c .. ' ' .. (type(allowed) == 'table' and allowed.err or tostring(allowed)) end
  if not allowed then
    return '-' .. c .. ' NOPERM this user has no permissions to run the ' .. (...) ..
      ' command or to access one of its keys'
  end
end

local function refused(c, a, b) -- command c is ARGV[a..b]
  if b - a + 1 > MAX_ARGS then
    return '-' .. c .. ' ERR ' .. (b - a + 1) .. ' arguments, more than a script can pass on (' .. MAX_ARGS .. ')'
  end
  return check(c, unpack(ARGV, a, b))
end

-- The ack's own right depends on the key only: checked once per call.
local ack_refused = check(0, 'XACK', key, group, '0-0')
local pending_refused = check(0, 'XPENDING', key, group, '0-0', '0-0', 1, consumer)

local out, i, nargs = {}, 3, #ARGV
while i <= nargs do
  local id, ack, ncmds = ARGV[i], ARGV[i + 1] == 'ack', tonumber(ARGV[i + 2])
  i = i + 3
  local first = i
  local result
  if ack then result = ack_refused else result = pending_refused end
  for c = 1, ncmds do
    local n = tonumber(ARGV[i])
    result = result or refused(c, i + 1, i + n)
    i = i + n + 1
  end
  if not result then
    local r
    if ack then
      r = redis.pcall('XACK', key, group, id)
    else
      r = redis.pcall('XPENDING', key, group, id, id, 1, consumer)
      if type(r) == 'table' and not r.err then r = #r end
    end
    result = r
    if type(r) == 'table' then result = '0 ' .. r.err end
    if r == 1 then -- a command Redis refuses now does not stop the others
      local at = first
      for c = 1, ncmds do
        local n = tonumber(ARGV[at])
        local w = redis.pcall(unpack(ARGV, at + 1, at + n))
        if result == 1 and type(w) == 'table' and w.err then result = c .. ' ' .. w.err end
        at = at + n + 1
      end
    end
  end
  out[#out + 1] = result
end
return out
