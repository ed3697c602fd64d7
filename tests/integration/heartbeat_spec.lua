-- The heartbeat on a real server (host/consumer/heartbeat.c): two hosts read
-- one group with min_idle = 1s and handlers that run several times that;
-- no entry is taken from the host running it, so none runs twice, and the
-- ledger written with ctx:write is exact. And the hand-back at SIGTERM.
local helper = require "tests.integration.helper"

local READY = 'msg="host ready"'
local N = 40

-- A handler of group ledger that posts each payment with ctx:write after
-- ms; fields: its read mode and min_idle.
local function poster(fields, ms)
  return string.format([[
local ls = require "luastream"

return {
  stream = "payments", group = "ledger", %s, workers = 40,
  handle = function(payment, ctx)
    ls.log.info("payment started", { payment_id = payment.id, read = %q })
    ls.sleep(%d)
    ctx:write("HINCRBY", "ledger:posted", tostring(payment.id), 1)
    return ls.ack()
  end,
}
]], fields, fields:match('read = "(%w+)"') or "new", ms)
end

local QUEUE = [[
local ls = require "luastream"

return {
  stream = "jobs", group = "workers",
  read = "claiming", claim_fallback = true, min_idle = "30s",
  batch = 300, workers = tonumber(os.getenv("LANES")),
  handle = function(job, ctx)
    ls.log.info("job started", { n = job.id, delivery_count = ctx.headers[ls.DELIVERY_COUNT_HEADER] })
    ls.sleep(3000)
    return ls.ack()
  end,
}
]]

-- Two hosts on the handlers of files post N payments; each is posted once,
-- whoever ran it. Returns the two hosts.
local function post_on_two_hosts(srv, files)
  assert(srv:call("XGROUP", "CREATE", "payments", "ledger", "$", "MKSTREAM"))
  local dir = helper.handlers_dir(files)
  local a = helper.host_start({ "--consumer", "host-a" }, { server = srv, dir = dir })
  local b = helper.host_start({ "--consumer", "host-b" }, { server = srv, dir = dir })
  a:wait_log(READY, 20, { plain = true })
  b:wait_log(READY, 20, { plain = true })
  srv:pipe(helper.payment_commands(1, N, 5))
  helper.wait_until(function()
    local pending = #srv:pending_ids("payments", "ledger")
    local n = tonumber(srv:call("HLEN", "ledger:posted")) or 0
    return n == N and pending == 0, n .. " posted, " .. pending .. " pending"
  end, 40, "every payment posted")
  for id = 1, N do assert.equal("1", srv:call("HGET", "ledger:posted", tostring(id))) end
  return a, b
end

-- A host (consumer c) on two handlers of group g reading streams a and b
-- with min_idle 1500ms, whose handlers sleep ms; returned once each has its
-- one entry running. opts: helper.host_start's (server or url).
local function running_on_a_and_b(srv, ms, opts)
  local function file(stream)
    return string.format([[
local ls = require "luastream"
return {
  stream = %q, group = "g", min_idle = "1500ms",
  handle = function() ls.sleep(%d) return ls.ack() end,
}
]], stream, ms)
  end
  opts.dir = helper.handlers_dir({ ["a.lua"] = file("a"), ["b.lua"] = file("b") })
  local host = helper.host_start({ "--consumer", "c" }, opts)
  host:wait_log(READY, 20, { plain = true })
  assert(srv:call("XADD", "a", "*", "n", "1"))
  assert(srv:call("XADD", "b", "*", "n", "1"))
  helper.wait_until(function()
    return #srv:pending_ids("a", "g") == 1 and #srv:pending_ids("b", "g") == 1
  end, 10, "both entries running")
  return host
end

describe("the heartbeat", function()
  after_each(helper.cleanup)

  it("keeps a host's entries while its handlers run six times min_idle: none runs twice #slow", function()
    local srv = helper.redis_start()
    local a, b = post_on_two_hosts(srv, {
      ["long.lua"] = poster('read = "claiming", claim_fallback = true, min_idle = "1s"', 6000),
    })
    local runs = {}
    for _, host in ipairs({ a, b }) do
      for _, r in ipairs(host:records({ msg = "payment started" })) do
        runs[r.payment_id] = (runs[r.payment_id] or 0) + 1
      end
    end
    for id = 1, N do
      assert.equal(1, runs[tostring(id)], "payment " .. id .. " started " .. tostring(runs[tostring(id)]) .. " times")
    end
    assert.equal(0, a:stop())
    assert.equal(0, b:stop())
  end)

  it("keeps the entries of a `new` subscription given min_idle from a reclaim reader while they run four times that #slow", function()
    local srv = helper.redis_start()
    -- the before-8.4 pattern (handlers/before-8.4), the `new` file given the group's min_idle
    local a, b = post_on_two_hosts(srv, {
      ["post.lua"] = poster('min_idle = "1s"', 4000),
      ["recover.lua"] = poster('read = "reclaim", min_idle = "1s"', 0),
    })
    for _, host in ipairs({ a, b }) do
      assert.same({}, host:records({ msg = "payment started", read = "reclaim" }), "reclaimed from a live host")
    end
    assert.equal(0, a:stop())
    assert.equal(0, b:stop())
  end)

  it("re-stamps in the lease renewal's call: one call per turn carries the renewals and every subscription due #slow", function()
    local srv = helper.redis_start()
    local host = running_on_a_and_b(srv, 8000, { server = srv })
    local monitor = srv:monitor()
    -- the keepalive's calls: KEYS (leases, then per heartbeat its lease,
    -- stream and retry stream, per pause look the pause key), ARGV identity,
    -- time to live, leases, riders, then each rider's section: a
    -- heartbeat's "1" group consumer nkeys (count id...)-per-key, a pause
    -- look's "p" prober probe_ms
    local function calls()
      local out = {}
      for _, c in ipairs(monitor:commands()) do
        local a = c.args
        local nkeys = (a[1] == "EVALSHA" or a[1] == "EVAL") and c.client ~= "lua" and tonumber(a[3])
        if nkeys and (a[4 + nkeys] or ""):match("^%x+ %d+ ") and a[5 + nkeys] == "20000" then
          local k = { at = tonumber(c.line:match("^(%d+%.%d+)")), leases = tonumber(a[6 + nkeys]), streams = {} }
          local key, at = 4 + k.leases, 8 + nkeys
          for _ = 1, tonumber(a[7 + nkeys]) do
            if a[at] == "p" then
              key, at = key + 1, at + 3
            else
              local n = tonumber(a[at + 3])
              k.streams[#k.streams + 1] = a[key + 1]
              key, at = key + 1 + n, at + 4
              for _ = 1, n do at = at + 1 + tonumber(a[at]) end
            end
          end
          table.sort(k.streams)
          out[#out + 1] = k
        end
      end
      return out
    end
    helper.wait_until(function() return #calls() >= 6 end, 10, "six keepalive calls")
    local seen = calls()
    for i, k in ipairs(seen) do
      assert.equal(2, k.leases, "call " .. i .. " renews both leases")
      assert.same({ "a", "b" }, k.streams, "call " .. i .. " carries both heartbeats")
      -- one call per turn (every min_idle / 3 = 500 ms), not one per lease and heartbeat
      if i > 1 then assert.is_true(k.at - seen[i - 1].at > 0.3, "call " .. i .. " follows the last by " .. (k.at - seen[i - 1].at) .. " s") end
    end
    for _, stream in ipairs({ "a", "b" }) do
      local p = assert(srv:call("XPENDING", stream, "g", "-", "+", "10"))
      assert.is_true(tonumber(p[1][3]) < 1000, stream .. " idle " .. p[1][3] .. " ms")
    end
    assert.equal(0, host:stop())
  end)

  -- Redis checks a script's declared KEYS against the caller's ACL before
  -- the script runs: one subscription's keys refused must not take the other
  -- subscriptions' heartbeats and consumer leases down with them (before the
  -- shared keepalive call each heartbeat went in a call of its own, and the
  -- renewals carried only lease keys).
  it("keeps one subscription's entries and lease when the user loses another subscription's keys #slow", function()
    local srv = helper.redis_start()
    srv:cli("ACL", "SETUSER", "app", "on", ">secret", "~*", "&*", "+@all")
    local url = string.format("redis://app:secret@127.0.0.1:%d", srv.port)
    local host = running_on_a_and_b(srv, 9000, { url = url })
    -- b's streams are no longer the user's; a's and the leases still are
    srv:cli("ACL", "SETUSER", "app", "resetkeys", "~a", "~a:*", "~luastream:*")
    os.execute("sleep 3")
    local p = assert(srv:call("XPENDING", "a", "g", "-", "+", "10"))
    assert.equal(1, #p)
    -- a heartbeat every min_idle / 3 = 500 ms: never idle as long as min_idle
    assert.is_true(tonumber(p[1][3]) < 1000, "a's entry idle " .. p[1][3] .. " ms")
    assert.equal(0, host:count({ msg = "the consumer lease failed, retrying", stream = "a" }),
      "a's lease renewals refused")
    host:signal("KILL")
  end)

  it("gives back at SIGTERM the entries read and never started: the other host starts them within 2 s, uncounted #slow", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["queue.lua"] = QUEUE })
    local a = helper.host_start({ "--consumer", "host-a" },
      { server = srv, dir = dir, env = { LANES = "1" } })
    a:wait_log(READY, 20, { plain = true })
    srv:pipe(helper.payment_commands(1, 300, 5, "jobs"))
    -- host-a reads them in one or two reads (as the publisher's pipe goes)
    helper.wait_until(function()
      local n = #assert(srv:call("XPENDING", "jobs", "workers", "-", "+", "1000", "host-a"))
      return n >= 200, n .. " pending for host-a"
    end, 20, "host-a to have read most of the 300")
    local b = helper.host_start({ "--consumer", "host-b" },
      { server = srv, dir = dir, env = { LANES = "300" } })
    b:wait_log(READY, 20, { plain = true })
    local t0 = helper.now()
    a:signal("TERM") -- one runs (3 s, finished at the drain), the others were never started
    -- without the hand-back, those host-a read would wait min_idle (30 s)
    b:wait_records({ msg = "job started" }, 299, 10, "host-b starting the 299 host-a did not")
    local took = helper.now() - t0
    assert.is_true(took <= 2, string.format("host-b started them %.2f s after SIGTERM", took))
    for _, r in ipairs(b:records({ msg = "job started" })) do
      -- as for a new entry: no earlier delivery (host-a's never ran)
      assert.equal("0", r.delivery_count, "job " .. r.n .. ": the delivery it never ran is counted")
    end
    assert.equal(1, a:count({ msg = "entries read but not started given back" }))
    assert.equal(0, a:wait_exit(20))
    assert.equal(0, b:stop())
  end)
end)
