-- SCRIPT_REPLAY (scripts.h): dead letters back onto the retry streams of the
-- groups that gave up on them, for the groups the caller allows only.
local dl = KEYS[1]
-- the (stream, group) pairs whose dead letters may be replayed: the
-- handlers that write to this dead-letter stream
local npairs = tonumber(ARGV[1])
local allowed, streams = {}, {}
for i = 1, npairs do
  local s, g = ARGV[2 * i], ARGV[2 * i + 1]
  if not allowed[s] then
    allowed[s] = {}
    streams[#streams + 1] = s
  end
  allowed[s][#allowed[s] + 1] = g
end
local mode = 2 + 2 * npairs -- where the mode and its arguments start
local t = redis.call('TYPE', dl)['ok']
if t ~= 'stream' and t ~= 'none' then
  return redis.error_reply('WRONGTYPE ' .. dl .. ' is a ' .. t .. ', not a stream')
end
-- A dead letter's fields but luastream's own, onto out.
local function own_fields(f, out)
  for i = 1, #f - 1, 2 do
    local k = f[i]
    if string.sub(k, 1, 12) ~= 'dead-letter-' and k ~= 'delivery-count'
        and k ~= 'retry-group' and k ~= 'original-id' then
      out[#out + 1] = k
      out[#out + 1] = f[i + 1]
    end
  end
  return out
end
-- A dead letter with dead-letter-cut holds its entry cut (too large to
-- keep): the fields to replay are the source entry's, while it exists.
local function source_fields(id, src, dl_id, size)
  local r = redis.call('XRANGE', src, dl_id, dl_id)
  if #r == 0 or not r[1][2] then
    return nil, 'dead letter ' .. id .. ' on ' .. dl .. ' keeps its entry cut (' .. size ..
      ' bytes, too large to hold) and the source entry ' .. dl_id .. ' on ' .. src ..
      ' is gone: there is nothing whole to replay'
  end
  return own_fields(r[1][2], {})
end
local function listed(list, v)
  for _, x in ipairs(list) do
    if x == v then return true end
  end
  return false
end
local function expected(list)
  return (#list > 1 and 'one of ' or '') .. table.concat(list, ', ')
end
-- the fields a replayed entry gets and where it goes, or nil and why it
-- cannot be replayed. Only the provenance luastream wrote decides where, and
-- only within what the caller allows.
local function replayed(id, f)
  local src, group, dl_id, cut = nil, nil, nil, nil
  for i = 1, #f - 1, 2 do
    local k, v = f[i], f[i + 1]
    if k == 'dead-letter-stream' then src = v
    elseif k == 'dead-letter-group' then group = v
    elseif k == 'dead-letter-id' then dl_id = v
    elseif k == 'dead-letter-cut' then cut = v
    end
  end
  if not (src and group and dl_id) then
    return nil, 'entry ' .. id .. ' on ' .. dl .. ' is not a dead letter luastream wrote ' ..
      '(it needs dead-letter-stream, dead-letter-group and dead-letter-id)'
  end
  if not allowed[src] then
    return nil, 'entry ' .. id .. ' on ' .. dl .. ': dead-letter-stream is "' .. src ..
      '", expected ' .. expected(streams)
  end
  if not listed(allowed[src], group) then
    return nil, 'entry ' .. id .. ' on ' .. dl .. ': dead-letter-group is "' .. group ..
      '", expected ' .. expected(allowed[src]) .. ' (for dead-letter-stream ' .. src .. ')'
  end
  if not string.match(dl_id, '^%d+%-%d+$') then
    return nil, 'entry ' .. id .. ' on ' .. dl .. ': dead-letter-id is "' .. dl_id ..
      '", expected an entry id such as 1700000000000-0'
  end
  local out, gone
  if cut then out, gone = source_fields(id, src, dl_id, cut) else out = own_fields(f, {}) end
  if not out then return nil, gone end
  local dest = src .. ':retry:' .. group
  local st = redis.pcall('TYPE', dest)
  if st.err then
    return nil, st.err .. ' (TYPE ' .. dest .. ' of dead letter ' .. id .. ')', true
  end
  st = st['ok']
  if st ~= 'stream' and st ~= 'none' then
    return nil, 'dead letter ' .. id .. ' on ' .. dl .. ': its retry stream ' .. dest ..
      ' is a ' .. st .. ', not a stream'
  end
  out[#out + 1] = 'original-id'; out[#out + 1] = dl_id
  return {id, dest, out}
end
local todo, skipped, next_after, last = {}, {}, '', ''
if ARGV[mode] == 'ids' then
  local seen = {}
  for i = mode + 1, #ARGV do
    local id = ARGV[i]
    if not seen[id] then
      seen[id] = true
      local r = t == 'none' and {} or redis.call('XRANGE', dl, id, id)
      if #r == 0 then return redis.error_reply('ERR no entry ' .. id .. ' on ' .. dl) end
      local item, why, refused = replayed(id, r[1][2])
      if refused then return redis.error_reply(why) end
      if not item then return redis.error_reply('ERR ' .. why) end
      todo[#todo + 1] = item
    end
  end
elseif ARGV[mode] == 'all' then
  if t == 'none' then return {{}, {}, '', ''} end -- no dead letter yet
  local after, count = ARGV[mode + 1], tonumber(ARGV[mode + 3])
  last = ARGV[mode + 2]
  if last == '+' then
    local top = redis.call('XREVRANGE', dl, '+', '-', 'COUNT', 1)
    if #top == 0 then return {{}, {}, '', ''} end
    last = top[1][1]
  end
  local r = redis.call('XRANGE', dl, after == '-' and '-' or '(' .. after, last, 'COUNT', count)
  for _, e in ipairs(r) do
    local item, why, refused = replayed(e[1], e[2])
    if refused then return redis.error_reply(why) end
    if item then todo[#todo + 1] = item else skipped[#skipped + 1] = {e[1], why} end
  end
  if #r == count then next_after = r[#r][1] end
else
  return redis.error_reply('ERR replay: the mode must be ids or all')
end
-- everything checked: now move
local moved = {}
for _, item in ipairs(todo) do
  -- A refusal (the ACL) names neither the command nor the key: say them.
  local new_id = redis.pcall('XADD', item[2], '*', unpack(item[3]))
  if type(new_id) == 'table' and new_id.err then
    return redis.error_reply(new_id.err .. ' (XADD ' .. item[2] .. ' of dead letter ' ..
      item[1] .. '; ' .. #moved .. ' moved before it)')
  end
  redis.call('XDEL', dl, item[1])
  moved[#moved + 1] = {item[1], item[2], new_id}
end
return {moved, skipped, next_after, last}
