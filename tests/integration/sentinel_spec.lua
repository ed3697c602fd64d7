-- Redis Sentinel: the host follows a failover. A master, a replica and three
-- sentinels run on loopback ports; one host runs the shipped ledger
-- (handlers/before-8.4: exactly-once writes with ctx:write) against
-- `redis+sentinel://.../mymaster`. Payments are published to the master while
-- the host handles them, the master is SIGKILLed, the sentinels promote the
-- replica and the host carries on against it. Entries the dead master had not
-- yet passed on to the replica are lost with it (asynchronous replication);
-- the spec publishes those again, like a producer that got no answer. (The
-- sentinel the host first subscribed to is killed before, so the host follows
-- the switch through another one.) At the
-- end every payment on the new master is handled once: nothing is pending,
-- each account's balance is the exact sum of its payments and each payment
-- appears once in its account's history.
--
-- A second test demotes the master by hand (REPLICAOF a server that does not
-- exist, so it keeps its data) while the sentinels still name it: the host's
-- next command gets READONLY, which drops the connection, and the attempts
-- that follow find a replica (ROLE) and fail, until the server is master again.
local cjson = require "cjson"
local helper = require "tests.integration.helper"
local sentinels = require "tests.integration.support.sentinels"

local PAYMENTS = tonumber(os.getenv("LUASTREAM_SENTINEL_PAYMENTS") or "1500")
local ACCOUNTS = 20
local MIN_IDLE_MS = 1000
local READY = 'msg="host ready"'
local SHIPPED = helper.repo_root .. "/handlers/before-8.4/"

-- Payment i: round robin over the accounts; every tenth a refund.
local function xadd(i) return helper.payment_xadd(i, ACCOUNTS) end

-- Starts `redis-cli --pipe` publishing payments first..last to srv, in the background.
local function publish_async(srv, first, last)
  local cmds = {}
  for i = first, last do cmds[#cmds + 1] = xadd(i) end
  return srv:pipe_async(cmds)
end

local function ledger_dir()
  local recover, n = helper.read_file(SHIPPED .. "recover_payment.lua")
    :gsub("(local MIN_IDLE%s*=%s*)[^\n%-]+", "%1" .. MIN_IDLE_MS .. " ")
  assert.equal(1, n, "no `local MIN_IDLE = ...` line in recover_payment.lua")
  return helper.handlers_dir({
    ["post_new_payment.lua"] = helper.read_file(SHIPPED .. "post_new_payment.lua"),
    ["recover_payment.lua"] = recover,
  })
end

local function some(list, max)
  max = max or 20
  local out = {}
  for i = 1, math.min(#list, max) do out[i] = tostring(list[i]) end
  local s = table.concat(out, ", ")
  if #list > max then s = s .. string.format(" ... (%d in all)", #list) end
  return s
end

-- Publishes again the payments of first..last that srv's stream lacks.
local function publish_missing(srv, first, last)
  local seen = {}
  for _, e in ipairs(srv:xrange("payments")) do seen[cjson.decode(e.fields.data).id] = true end
  local missing = {}
  for i = first, last do
    if not seen[i] then missing[#missing + 1] = xadd(i) end
  end
  if #missing > 0 then srv:pipe(missing) end
  return #missing
end

-- Waits until the group read the whole stream and nothing is pending, then
-- checks the ledger against the stream; returns a list of problems.
local function settle_and_check(srv, payments)
  local last_id = assert(srv:call("XREVRANGE", "payments", "+", "-", "COUNT", "1"))[1][1]
  local problems = {}
  local function problem(fmt, ...) problems[#problems + 1] = string.format(fmt, ...) end
  local settled, why = pcall(helper.wait_until, function()
    local g = srv:group("payments", "ledger")
    local replies = srv:xlen("payments.posted")
    return g and g["last-delivered-id"] == last_id and g.pending == 0 and replies >= payments,
      string.format("last delivered %s of %s, %s pending, %d replies",
        g and g["last-delivered-id"], last_id, g and g.pending, replies)
  end, 60, "every payment posted")
  if not settled then problem("%s", why) end

  local expected, times_on_stream = {}, {}
  for _, e in ipairs(srv:xrange("payments")) do
    local p = cjson.decode(e.fields.data)
    times_on_stream[p.id] = (times_on_stream[p.id] or 0) + 1
    expected[p.account] = (expected[p.account] or 0) + p.amount_cents
  end
  local not_once = {}
  for i = 1, payments do
    if times_on_stream[i] ~= 1 then not_once[#not_once + 1] = i .. " x" .. (times_on_stream[i] or 0) end
  end
  if #not_once > 0 then problem("payments not on the stream exactly once: %s", some(not_once)) end

  local got = {}
  local flat = assert(srv:call("HGETALL", "ledger:balances"))
  if #flat == 0 and next(flat) then
    for account, v in pairs(flat) do got[account] = tonumber(v) end
  else
    for i = 1, #flat, 2 do got[flat[i]] = tonumber(flat[i + 1]) end
  end
  local wrong = {}
  for a = 1, ACCOUNTS do
    local account = helper.account_of(a, ACCOUNTS)
    if got[account] ~= (expected[account] or 0) then
      wrong[#wrong + 1] = string.format("%s expected %s got %s", account, expected[account] or 0, tostring(got[account]))
    end
  end
  if #wrong > 0 then problem("%d balances wrong: %s", #wrong, some(wrong)) end

  local history_wrong = {}
  for a = 1, ACCOUNTS do
    local account = helper.account_of(a, ACCOUNTS)
    local times = {}
    for _, id in ipairs(assert(srv:call("LRANGE", "ledger:history:" .. account, "0", "-1"))) do
      times[tonumber(id)] = (times[tonumber(id)] or 0) + 1
    end
    for i = a, payments, ACCOUNTS do
      if times[i] ~= 1 then history_wrong[#history_wrong + 1] = account .. ":" .. i .. " x" .. (times[i] or 0) end
    end
  end
  if #history_wrong > 0 then problem("history entries not exactly once: %s", some(history_wrong)) end

  local pending = srv:pending_ids("payments", "ledger")
  if #pending > 0 then problem("%d entries still pending in group ledger: %s", #pending, some(pending)) end
  return problems
end

describe("Redis Sentinel", function()
  after_each(helper.cleanup)

  it(string.format("follows a failover (master SIGKILLed) under load: %d payments posted exactly once #slow", PAYMENTS), function()
    local started = helper.now()
    local set = sentinels.start()
    local old, new = set.master, set.replica
    local h = helper.host_start({ "--consumer", "host-a" }, { url = set.url, dir = ledger_dir() })
    h:wait_log(READY, 30, { plain = true })

    -- The sentinel the host asked first and subscribed to goes away: the
    -- subscription moves to another one, and questions skip it. Two of three
    -- sentinels are still a majority for the failover.
    set.sentinels[1]:kill()
    h:wait_log("sentinel subscription failed, trying the next sentinel", 30, { plain = true })
    helper.wait_until(function()
      for k = 2, 3 do
        if set.sentinels[k]:cli("CLIENT", "LIST"):find("cmd=subscribe", 1, true) then return true end
      end
      return false
    end, 30, "the host subscribed to another sentinel")

    -- The first half arrives while the host handles it; the master dies mid-way.
    local half = math.floor(PAYMENTS / 2)
    local pub = publish_async(old, 1, half)
    helper.wait_until(function() return old:xlen("payments.posted") > 50 end, 30, "payments being posted")
    old:kill()
    if not pub:wait(30) then pub:kill("KILL") pub:wait(5) end

    set:wait_master(new, 30)
    -- What the dead master had not passed on is gone: published again.
    local republished = publish_missing(new, 1, half)
    -- The second half goes to the new master while the host catches up.
    pub = publish_async(new, half + 1, PAYMENTS)
    assert.equal(0, pub:wait(60), "redis-cli --pipe to the new master")

    local problems = settle_and_check(new, PAYMENTS)
    local new_addr = "127.0.0.1:" .. new.port
    -- The log shows the switch and the connections made to the new master.
    local switched = h:records({ msg = "redis master switched" })
    local reconnected = h:records(function(r) return r.msg == "redis connected" and r.master == new_addr end)
    assert.equal(0, h:stop(30), "host exit status")
    io.stderr:write(string.format("sentinel: %d payments, %d republished after the failover, %d s in all\n",
      PAYMENTS, republished, math.floor(helper.now() - started)))
    assert(#problems == 0, "after the failover:\n  " .. table.concat(problems, "\n  "))
    assert.is_true(#switched >= 1, "no 'redis master switched' line in the host's log")
    assert.equal(new_addr, switched[1].to)
    assert.equal(set.url, switched[1].redis)
    assert.are_not.equal("127.0.0.1:" .. set.sentinels[1].port, switched[1].sentinel)
    assert.is_true(#reconnected >= 1, "no 'redis connected' line naming the new master " .. new_addr)
  end)

  it("drops a connection answered READONLY and takes no replica for the master", function()
    -- Sentinels slow to judge, so that they start no failover meanwhile.
    local set = sentinels.start({ down_after_ms = 60000 })
    local srv = set.master
    local h = helper.host_start({ "--consumer", "host-a" }, { url = set.url, dir = ledger_dir(), log_level = "debug" })
    h:wait_log(READY, 30, { plain = true })
    local cmds = {}
    for i = 1, 100 do cmds[i] = xadd(i) end
    srv:pipe(cmds)
    helper.wait_until(function() return srv:xlen("payments.posted") == 100 end, 30, "the first payments posted")

    local mark = h:mark()
    local nowhere = helper.free_port()
    srv:cli("REPLICAOF", "127.0.0.1", tostring(nowhere))
    local addr = "127.0.0.1:" .. srv.port
    h:wait_log(addr .. " answered READONLY: no longer the master of mymaster", 30, { plain = true, after = mark })
    h:wait_log(addr .. " is not the master of mymaster (ROLE: slave)", 30, { plain = true, after = mark })
    local demoted = h:mark()
    srv:cli("REPLICAOF", "NO", "ONE")
    h:wait_records(function(r)
      return r._pos > demoted and r.msg == "redis connected" and r.master == addr
    end, 1, 30, "a connection made again to the master")

    cmds = {}
    for i = 101, 200 do cmds[#cmds + 1] = xadd(i) end
    srv:pipe(cmds)
    local problems = settle_and_check(srv, 200)
    assert.equal(0, h:stop(30), "host exit status")
    assert(#problems == 0, "after the demotion:\n  " .. table.concat(problems, "\n  "))
  end)

  it("publish --wait through the sentinels: the master found, the replica's acknowledgement counted", function()
    local set = sentinels.start({ down_after_ms = 60000 })
    local code, out, err = helper.luastream("publish", "--redis", set.url, "payments", '{"id":1}', "--wait", "1,2s")
    assert.equal(0, code, out .. err)
    local id = helper.trim(out)
    assert.matches("1 of 1 replica acknowledged entry " .. id, err, 1, true)
    assert.equal(1, #set.replica:xrange("payments", id, id))
    code, out, err = helper.luastream("publish", "--redis", set.url, "payments", '{"id":2}', "--wait", "2,200ms")
    assert.equal(3, code, out .. err)
    assert.matches("1 of 2 replicas acknowledged entry " .. helper.trim(out), err, 1, true)
  end)
end)
