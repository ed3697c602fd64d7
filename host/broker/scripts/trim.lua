-- SCRIPT_TRIM (scripts.h): caps a stream to its newest ARGV[2] entries (0:
-- no cap; a loss, whatever the groups did), then, when ARGV[1] is "1", trims
-- it up to what every group reading it has finished with. A group has
-- finished with an entry when the entry was delivered to it (at or below
-- its last-delivered-id) and is no longer pending there; the stream keeps
-- every entry from the lowest id that some group has not finished with: its
-- oldest pending entry, else the entry after its last-delivered-id. A
-- stream without groups is kept whole by that second step.
-- Ids are compared as text, digit by digit: no number is rounded.
local key = KEYS[1]
if redis.call('EXISTS', key) == 0 then return 0 end
local finished, max_len = ARGV[1] == '1', tonumber(ARGV[2])
local trimmed = 0
if max_len > 0 then trimmed = redis.call('XTRIM', key, 'MAXLEN', max_len) end
if not finished then return trimmed end

local function num_less(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end

local function id_less(a, b)
  local am, as = string.match(a, '^(%d+)%-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)%-(%d+)$')
  if am ~= bm then return num_less(am, bm) end
  return num_less(as, bs)
end

-- a decimal string plus one
local function incr(n)
  local i = #n
  while i > 0 and string.sub(n, i, i) == '9' do i = i - 1 end
  if i == 0 then return '1' .. string.rep('0', #n) end
  return string.sub(n, 1, i - 1) .. string.char(string.byte(n, i) + 1) .. string.rep('0', #n - i)
end

-- the id right after id
local function next_id(id)
  local ms, seq = string.match(id, '^(%d+)%-(%d+)$')
  if seq == '18446744073709551615' then return incr(ms) .. '-0' end
  return ms .. '-' .. incr(seq)
end

local keep
for _, g in ipairs(redis.call('XINFO', 'GROUPS', key)) do
  local name, last, pending
  for i = 1, #g - 1, 2 do
    if g[i] == 'name' then name = g[i + 1]
    elseif g[i] == 'last-delivered-id' then last = g[i + 1]
    elseif g[i] == 'pending' then pending = g[i + 1] end
  end
  -- a group at the largest id there is has finished with everything
  local from = last ~= '18446744073709551615-18446744073709551615' and next_id(last) or nil
  if pending > 0 then
    local oldest = redis.call('XPENDING', key, name)[2]
    if from == nil or id_less(oldest, from) then from = oldest end
  end
  if from ~= nil and (keep == nil or id_less(from, keep)) then keep = from end
end
if keep == nil then
  -- no group, or every group at the largest id: nothing is trimmed without
  -- a group to say what is finished
  return trimmed
end
return trimmed + redis.call('XTRIM', key, 'MINID', keep)
