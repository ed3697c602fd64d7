-- SCRIPT_OUTCOME (scripts.h): the outcomes of many entries of one key, each
-- written only while its entry is still pending, so never twice. A command
-- Redis refuses does not stop the others: the first refusal is reported.
local key, group = KEYS[1], ARGV[1]
local MAX_ARGS = 7000 -- unpack stops near 8000 values: refuse rather than fail the call
local out, i, nargs = {}, 2, #ARGV
while i <= nargs do
  local id, ack, ncmds = ARGV[i], ARGV[i + 1] == 'ack', tonumber(ARGV[i + 2])
  i = i + 3
  local r
  if ack then
    r = redis.pcall('XACK', key, group, id)
  else
    r = redis.pcall('XPENDING', key, group, id, id, 1)
    if type(r) == 'table' and not r.err then r = #r end
  end
  local live, result = r == 1, r
  if type(r) == 'table' then result = '0 ' .. r.err end
  for c = 1, ncmds do
    local n = tonumber(ARGV[i])
    if live then
      local w
      if n > MAX_ARGS then
        w = { err = 'ERR ' .. n .. ' arguments, more than a script can pass on (' .. MAX_ARGS .. ')' }
      else
        w = redis.pcall(unpack(ARGV, i + 1, i + n))
      end
      if result == 1 and type(w) == 'table' and w.err then result = c .. ' ' .. w.err end
    end
    i = i + n + 1
  end
  out[#out + 1] = result
end
return out
