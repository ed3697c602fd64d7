-- ledger: publishing payments to the shipped ledger (handlers/before-8.4,
-- handlers/cluster) and checking afterwards that each was posted exactly
-- once: balances, histories, replies, nothing pending. Works on a Server
-- (redis.lua) and on a Cluster (cluster.lua) alike: both answer :call.
local cjson = require "cjson"
local payments = require "tests.integration.support.payments"
local processes = require "tests.integration.support.processes"

local ledger = {}

--[[ Where a ledger lives. opts: stream (default "payments"; the cluster
example's is "{payments}"), accounts (default 20), payments (how many were
published, ids 1..payments). Key names follow the shipped handlers. ]]
local function layout(opts)
  local stream = opts.stream or "payments"
  local prefix = stream == "payments" and "" or (stream .. ":")
  return {
    stream = stream, accounts = opts.accounts or 20, payments = opts.payments,
    balances = prefix .. "ledger:balances", history = prefix .. "ledger:history:",
    replies = stream .. ".posted", group = opts.group or "ledger",
  }
end

--- XADD commands for payments first..last (payments.payment_xadd: round robin
--- over the accounts, every tenth a refund), for Server:pipe or Cluster:run.
function ledger.commands(first, last, opts)
  local l = layout(opts or {})
  local cmds = {}
  for i = first, last do
    local cmd = payments.payment_xadd(i, l.accounts)
    cmd[2] = l.stream
    cmds[#cmds + 1] = cmd
  end
  return cmds
end

-- A hash reply (RESP3 map or flat list) as {field = number}.
local function hash(reply)
  local out = {}
  if #reply == 0 then
    for k, v in pairs(reply) do out[k] = tonumber(v) end
  else
    for i = 1, #reply, 2 do out[reply[i]] = tonumber(reply[i + 1]) end
  end
  return out
end

local function some(list, max)
  max = max or 20
  local out = {}
  for i = 1, math.min(#list, max) do out[i] = tostring(list[i]) end
  local s = table.concat(out, ", ")
  if #list > max then s = s .. string.format(" ... (%d in all)", #list) end
  return s
end
ledger.some = some

--- Waits until the group has nothing pending and every payment has a reply.
function ledger.wait_posted(db, opts, timeout_s)
  local l = layout(opts)
  processes.wait_until(function()
    local ok, pending = pcall(db.call, db, "XPENDING", l.stream, l.group)
    local ok2, replies = pcall(db.call, db, "XLEN", l.replies)
    if not (ok and ok2 and pending and replies) then return false, "the server not answering" end
    return tonumber(pending[1]) == 0 and replies >= l.payments,
      string.format("%s pending, %s of %d replies", tostring(pending[1]), tostring(replies), l.payments)
  end, timeout_s or 60, "every payment posted")
end

--[[ What differs from "payments 1..opts.payments each posted exactly once":
a list of problems (empty when all is well). ]]
function ledger.problems(db, opts)
  local l = layout(opts)
  local problems = {}
  local function problem(fmt, ...) problems[#problems + 1] = string.format(fmt, ...) end

  local expected, times_on_stream, entry_of = {}, {}, {}
  for _, e in ipairs(assert(db:call("XRANGE", l.stream, "-", "+"))) do
    local fields = {}
    for k = 1, #e[2], 2 do fields[e[2][k]] = e[2][k + 1] end
    local p = cjson.decode(fields.data)
    times_on_stream[p.id] = (times_on_stream[p.id] or 0) + 1
    entry_of[p.id] = e[1]
    expected[p.account] = (expected[p.account] or 0) + p.amount_cents
  end
  local not_once = {}
  for i = 1, l.payments do
    if times_on_stream[i] ~= 1 then not_once[#not_once + 1] = i .. " x" .. (times_on_stream[i] or 0) end
  end
  if #not_once > 0 then problem("payments not on the stream exactly once: %s", some(not_once)) end

  local got = hash(assert(db:call("HGETALL", l.balances)))
  local wrong = {}
  for a = 1, l.accounts do
    local account = payments.account_of(a, l.accounts)
    if got[account] ~= (expected[account] or 0) then
      wrong[#wrong + 1] = string.format("%s expected %s got %s", account, expected[account] or 0, tostring(got[account]))
    end
  end
  if #wrong > 0 then problem("%d balances wrong: %s", #wrong, some(wrong)) end

  local history_wrong = {}
  for a = 1, l.accounts do
    local account = payments.account_of(a, l.accounts)
    local times = {}
    for _, id in ipairs(assert(db:call("LRANGE", l.history .. account, "0", "-1"))) do
      times[tonumber(id)] = (times[tonumber(id)] or 0) + 1
    end
    for i = a, l.payments, l.accounts do
      if times[i] ~= 1 then history_wrong[#history_wrong + 1] = account .. ":" .. i .. " x" .. (times[i] or 0) end
    end
  end
  if #history_wrong > 0 then problem("history entries not exactly once: %s", some(history_wrong)) end

  local replies, bad_reply = {}, {}
  for _, e in ipairs(assert(db:call("XRANGE", l.replies, "-", "+"))) do
    local fields = {}
    for k = 1, #e[2], 2 do fields[e[2][k]] = e[2][k + 1] end
    local id = cjson.decode(fields.data).payment_id
    replies[id] = (replies[id] or 0) + 1
    if fields["original-id"] ~= entry_of[id] then
      bad_reply[#bad_reply + 1] = string.format("%s answers %s, payment %s is %s", e[1],
        tostring(fields["original-id"]), tostring(id), tostring(entry_of[id]))
    end
  end
  local missing, doubled = {}, {}
  for i = 1, l.payments do
    if not replies[i] then missing[#missing + 1] = i
    elseif replies[i] > 1 then doubled[#doubled + 1] = i .. " x" .. replies[i] end
  end
  if #missing > 0 then problem("payments without a reply: %s", some(missing)) end
  if #doubled > 0 then problem("payments with more than one reply: %s", some(doubled)) end
  if #bad_reply > 0 then problem("replies naming the wrong entry: %s", some(bad_reply)) end

  local pending = assert(db:call("XPENDING", l.stream, l.group))
  if tonumber(pending[1]) ~= 0 then problem("%s entries still pending in group %s", tostring(pending[1]), l.group) end
  return problems
end

--- Errors listing the problems unless every payment was posted exactly once.
function ledger.assert_exact(db, opts)
  local problems = ledger.problems(db, opts)
  assert(#problems == 0, "exactly-once broken:\n  " .. table.concat(problems, "\n  "))
end

return ledger
