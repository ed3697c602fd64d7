-- The hand-back and the heartbeat on a real server, when a host stops, dies
-- or stalls (host/consumer/handback.c, heartbeat.c):
--  - SIGTERM on a `new` subscription holding 300 read-ahead entries: they
--    come back through the group's retry stream with their delivery counts
--    unchanged, and another host runs each once;
--  - claiming reads with min_idle = 1s: a SIGKILLed host's entries are taken
--    by the other within min_idle + 1 s, and a host
--    SIGSTOPped for 10 s loses its entries to the other, its late outcomes
--    changing nothing: the ctx:write ledger is exact in both.
local cjson = require "cjson"
local helper = require "tests.integration.helper"

local READY = 'msg="host ready"'
local RETRY = "jobs:retry:workers"

-- A `new` subscription: one read takes up to 300; LANES lanes; SLEEP_MS a run.
local QUEUE = [[
local ls = require "luastream"

return {
  stream = "jobs", group = "workers",
  batch = 300, workers = tonumber(os.getenv("LANES")),
  handle = function(job, ctx)
    ls.log.info("job started", { n = job.id, deliveries = ctx.deliveries })
    ls.sleep(tonumber(os.getenv("SLEEP_MS")))
    ctx:write("HINCRBY", "jobs:done", tostring(job.id), 1)
    return ls.ack()
  end,
}
]]

-- Claiming reads; each run yields for 5 s, then posts the payment once.
local LONG = [[
local ls = require "luastream"

return {
  stream = "payments", group = "ledger",
  read = "claiming", claim_fallback = true, min_idle = "1s",
  workers = 40,
  handle = function(payment, ctx)
    ls.log.info("payment started", { payment_id = payment.id, entry_id = ctx.id })
    ls.sleep(5000)
    ctx:write("HINCRBY", "ledger:posted", tostring(payment.id), 1)
    return ls.ack()
  end,
}
]]

local MIN_IDLE = 1.0

-- payment id (string) -> the times the hosts started it
local function starts(hosts, msg, key)
  local runs = {}
  for _, host in ipairs(hosts) do
    for _, r in ipairs(host:records({ msg = msg })) do runs[r[key]] = (runs[r[key]] or 0) + 1 end
  end
  return runs
end

local function pending_of(srv, stream, group, consumer)
  local ids = {}
  for _, p in ipairs(assert(srv:call("XPENDING", stream, group, "-", "+", "1000", consumer))) do
    ids[#ids + 1] = p[1]
  end
  return ids
end

-- The entry ids host started (its "payment started" records), as a set.
local function started_ids(host)
  local set = {}
  for _, r in ipairs(host:records({ msg = "payment started" })) do set[r.entry_id] = true end
  return set
end

-- Two hosts on LONG, both reading, N payments published, until host-a runs
-- some: returns srv, a, b.
local function two_hosts_running(n)
  local srv = helper.redis_start()
  assert(srv:call("XGROUP", "CREATE", "payments", "ledger", "$", "MKSTREAM"))
  local dir = helper.handlers_dir({ ["long.lua"] = LONG })
  local a = helper.host_start({ "--consumer", "host-a" }, { server = srv, dir = dir })
  local b = helper.host_start({ "--consumer", "host-b" }, { server = srv, dir = dir })
  a:wait_log(READY, 20, { plain = true })
  b:wait_log(READY, 20, { plain = true })
  srv:pipe(helper.payment_commands(1, n, 5))
  a:wait_records({ msg = "payment started" }, 1, 10, "host-a running payments")
  return srv, a, b
end

-- Waits until host b started every id of ids; the seconds since t0 it took.
local function taken_by(b, ids, t0, timeout)
  local took
  helper.wait_until(function()
    local seen, missing = started_ids(b), 0
    for _, id in ipairs(ids) do
      if not seen[id] then missing = missing + 1 end
    end
    if missing == 0 then took = helper.now() - t0 end
    return missing == 0, missing .. " of " .. #ids .. " not taken"
  end, timeout, "host-b taking host-a's entries")
  return took
end

-- Every payment posted once in the ledger, nothing pending.
local function assert_ledger_exact(srv, n)
  helper.wait_until(function()
    local posted = tonumber(srv:call("HLEN", "ledger:posted")) or 0
    local pending = #srv:pending_ids("payments", "ledger")
    return posted == n and pending == 0, posted .. " posted, " .. pending .. " pending"
  end, 30, "every payment posted")
  for id = 1, n do
    assert.equal("1", srv:call("HGET", "ledger:posted", tostring(id)), "payment " .. id)
  end
end

-- Sends host a the signal sig and checks that host b takes every entry a
-- held within min_idle + 1 s (waiting at most wait_s). Returns when the
-- signal went and a's ids.
local function signal_and_take_over(srv, a, b, sig, wait_s)
  local t0 = helper.now()
  a:signal(sig)
  local ids = pending_of(srv, "payments", "ledger", "host-a")
  assert.is_true(#ids > 0, "host-a held nothing at SIG" .. sig)
  local took = taken_by(b, ids, t0, wait_s)
  assert.is_true(took <= MIN_IDLE + 1,
    string.format("host-b took host-a's %d entries %.2f s after SIG%s", #ids, took, sig))
  return t0, ids
end

describe("the hand-back", function()
  after_each(helper.cleanup)

  it("gives back at SIGTERM a `new` subscription's 300 read-ahead entries through the retry stream, counts unchanged: another host runs each once #slow", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["queue.lua"] = QUEUE })
    local a = helper.host_start({ "--consumer", "host-a" },
      { server = srv, dir = dir, env = { LANES = "1", SLEEP_MS = "1500" } })
    a:wait_log(READY, 20, { plain = true })
    -- 290 new jobs, and 10 copies a retry left before, their count with them
    local cmds = helper.payment_commands(1, 290, 5, "jobs")
    for id = 291, 300 do
      cmds[#cmds + 1] = { "XADD", RETRY, "*", "data", helper.payment(id, "acct-1"),
        "delivery-count", "2", "original-id", "0-" .. id }
    end
    srv:pipe(cmds)
    local held
    helper.wait_until(function()
      held = #pending_of(srv, "jobs", "workers", "host-a") + #pending_of(srv, RETRY, "workers", "host-a")
      return held >= 250, held .. " pending for host-a"
    end, 20, "host-a to have read most of the 300")
    a:signal("TERM") -- one runs (finished at the drain); the others were never started
    assert.equal(0, a:wait_exit(20))
    assert.equal(1, a:count({ msg = "job started" }))
    local given = a:records({ msg = "entries read but not started given back" })
    assert.equal(1, #given)
    assert.is_true(tonumber(given[1].entries) >= held - 1, given[1].entries .. " given back of " .. held)
    assert.same({}, pending_of(srv, "jobs", "workers", "host-a"), "acked on the stream")
    assert.same({}, pending_of(srv, RETRY, "workers", "host-a"), "acked on the retry stream")
    -- each copy carries the count the next run sees: 0, or the 2 it had
    local copied = 0 -- the copies of entries of the stream
    for _, e in ipairs(srv:xrange(RETRY)) do
      local id = cjson.decode(e.fields.data).id
      assert.equal(id <= 290 and "0" or "2", e.fields["delivery-count"], "job " .. id)
      if id <= 290 then copied = copied + 1 end
    end
    assert.is_true(copied >= tonumber(given[1].entries) - 10, copied .. " copies on the retry stream")

    local b = helper.host_start({ "--consumer", "host-b" },
      { server = srv, dir = dir, env = { LANES = "300", SLEEP_MS = "0" } })
    helper.wait_until(function()
      local done = tonumber(srv:call("HLEN", "jobs:done")) or 0
      local left = #srv:pending_ids("jobs", "workers") + #srv:pending_ids(RETRY, "workers")
      return done == 300 and left == 0, done .. " done, " .. left .. " pending"
    end, 20, "every job done")
    local runs = starts({ a, b }, "job started", "n")
    for id = 1, 300 do
      assert.equal(1, runs[tostring(id)], "job " .. id .. " started " .. tostring(runs[tostring(id)]) .. " times")
      assert.equal("1", srv:call("HGET", "jobs:done", tostring(id)), "job " .. id)
    end
    for _, r in ipairs(b:records({ msg = "job started" })) do
      assert.equal(tonumber(r.n) <= 290 and "0" or "2", r.deliveries, "job " .. r.n .. ": its count changed")
    end
    assert.equal(0, b:stop())
  end)

  it("takes a SIGKILLed host's entries within min_idle + 1 s of the kill, each posted once #slow", function()
    local N = 20
    local srv, a, b = two_hosts_running(N)
    signal_and_take_over(srv, a, b, "KILL", 15)
    assert_ledger_exact(srv, N)
    assert.equal(0, b:stop())
  end)

  it("takes the entries of a host SIGSTOPped for 10 s; its late outcomes change nothing #slow", function()
    local N = 20
    local srv, a, b = two_hosts_running(N)
    local t0, ids = signal_and_take_over(srv, a, b, "STOP", 9)
    -- host-b finishes them (5 s each) while host-a is still stopped
    assert_ledger_exact(srv, N)
    helper.wait_until(function() return helper.now() - t0 >= 10 end, 15, "10 s of SIGSTOP")
    a:signal("CONT")
    -- host-a's handlers wake and finish: their outcomes find the entries
    -- acknowledged by host-b, and write nothing
    -- (a handler woken mid-run finishes its 5 s first; a loaded machine
    -- slows the reconnects that come before its outcome)
    a:wait_records({ msg = "already acknowledged by another consumer; effects skipped" }, #ids, 20,
      "host-a's late outcomes skipped")
    assert_ledger_exact(srv, N)
    local runs = starts({ a, b }, "payment started", "payment_id")
    for id = 1, N do assert.is_true(runs[tostring(id)] >= 1, "payment " .. id .. " never started") end
    assert.equal(0, a:stop())
    assert.equal(0, b:stop())
  end)
end)
