-- Redis Cluster: the host routes every command to the master of its key's
-- slot, and carries on through a failover and a slot migration without losing
-- or doubling a payment (handlers/cluster/post_payment.lua, the ledger with
-- hash-tagged names).
local helper = require "tests.integration.helper"
local cluster = require "tests.integration.support.cluster"
local processes = require "tests.integration.support.processes"

local READY = 'msg="host ready"'
local POSTED = { msg = "payment posted" }
local STREAM = "{payments}"
local EXAMPLE = helper.repo_root .. "/handlers/cluster/post_payment.lua"

local function amount(id) return 100 + id end
local function account(id) return "acct-" .. ((id - 1) % 7 + 1) end

-- XADD commands for payments first..last with explicit ids (<id>-1): one sent
-- twice (a retried batch) is refused rather than added again.
local function payments(first, last)
  local cmds = {}
  for id = first, last do
    cmds[#cmds + 1] = { "XADD", STREAM, id .. "-1", "data",
      string.format('{"id":%d,"account":"%s","amount_cents":%d}', id, account(id), amount(id)),
      "partition-key", account(id) }
  end
  return cmds
end

-- Every payment 1..n is in the ledger exactly once: each account's balance is
-- the sum of its payments and its history lists each of them once.
local function assert_ledger_exact(c, n)
  local want, ids = {}, {}
  for id = 1, n do
    want[account(id)] = (want[account(id)] or 0) + amount(id)
    ids[account(id)] = (ids[account(id)] or 0) + 1
  end
  local balances = assert(c:call("HGETALL", STREAM .. ":ledger:balances"))
  local got = {}
  for k, v in pairs(balances) do got[k] = tonumber(v) end
  assert.same(want, got)
  for acct, count in pairs(ids) do
    local history = assert(c:call("LRANGE", STREAM .. ":ledger:history:" .. acct, "0", "-1"))
    local seen = {}
    for _, id in ipairs(history) do
      assert.is_nil(seen[id], "payment " .. id .. " twice in the history of " .. acct)
      seen[id] = true
    end
    assert.equal(count, #history, "history of " .. acct)
  end
  assert.same({}, assert(c:call("XPENDING", STREAM, "ledger", "-", "+", "100")))
end

-- The group, made before the payments come so that the host reads them all.
local function make_group(c)
  assert(c:call("XGROUP", "CREATE", STREAM, "ledger", "0", "MKSTREAM"))
end

local function start_host(c, extra)
  local dir = helper.handlers_dir({ ["post_payment.lua"] = helper.read_file(EXAMPLE) })
  local args = { "--redis", c.url }
  for _, a in ipairs(extra or {}) do args[#args + 1] = a end
  local host = helper.host_start(args, { dir = dir })
  host:wait_log(READY, 30, { plain = true })
  return host
end

describe("a Redis Cluster", function()
  after_each(helper.cleanup)

  it("gets each command on the master of its slot, and refuses keys of two slots", function()
    local c = cluster.start { masters = 3 }
    local host = start_host(c, { "--http", "127.0.0.1:0" })
    assert.equal(1, host:count { msg = "redis cluster slot map", masters = "3" })
    -- keyless and keyed commands of the host reached every master it needs:
    -- one connection per master for each of its own connections
    for _, n in ipairs(c.nodes) do
      local names = n:cli("CLIENT", "LIST")
      assert.truthy(names:find("cmd=", 1, true), "no client on master " .. n.port)
    end
    c:run(payments(1, 300))
    host:wait_records(POSTED, 300, 30, "300 payments posted")
    assert_ledger_exact(c, 300)
    local replies = assert(c:call("XLEN", STREAM .. ".posted"))
    assert.equal(300, replies)
    -- the lag in seconds: one script call over the stream and its retry
    -- stream, in their slot's master; its series exist once it answered
    local port = helper.health_port(host)
    helper.wait_until(function()
      local _, page = helper.http_get(port, "/metrics")
      return page:find('\nluastream_group_lag_seconds{stream="{payments}",group="ledger"} 0\n', 1, true)
        and page:find('\nluastream_group_oldest_pending_seconds{stream="{payments}",group="ledger"} 0\n', 1, true)
    end, 10, "the lag in seconds on a cluster")
    assert.equal(0, host:stop())

    -- untagged names: the host says which keys are in which slot, and stops
    local plain = helper.handlers_dir({
      ["post_new_payment.lua"] = helper.read_file(helper.repo_root .. "/handlers/before-8.4/post_new_payment.lua"),
    })
    local bad = helper.host_start({ "--redis", c.url }, { dir = plain })
    assert.equal(1, bad:wait_exit(30))
    assert.truthy(bad:log():find('stream "payments" (slot 8507), retry stream "payments:retry:ledger" '
      .. '(slot 16331)', 1, true), bad:log())
    assert.truthy(bad:log():find('stream = "{payments}", reply_to = "{payments}.posted"', 1, true))

    -- a write to another slot fails the delivery at the handler's line
    local other = helper.handlers_dir({
      ["post_payment.lua"] = helper.read_file(EXAMPLE):gsub('"{payments}:ledger:balances"', '"balances"'),
    })
    local h2 = helper.host_start({ "--redis", c.url }, { dir = other })
    h2:wait_log(READY, 30, { plain = true })
    c:run(payments(301, 301))
    h2:wait_log('ctx:write: key \\"balances\\" (hash slot', 20, { plain = true })
    assert.equal(1, #assert(c:call("XPENDING", STREAM, "ledger", "-", "+", "10")))
    assert.equal(0, h2:stop())
  end)

  it("spreads a partitioned stream over its masters, publish and handlers alike", function()
    local c = cluster.start { masters = 3 }
    local dir = helper.handlers_dir({ ["orders.lua"] = [[
      local ls = require "luastream"
      return {
        stream = "orders", group = "count", start = "beginning", partitions = 8, by_key = true,
        reply_to = "orders.done",
        handle = function(order, ctx)
          ctx:write("HINCRBY", "totals:" .. ctx.partition_tag, order.account, order.cents)
          return ls.reply({ id = order.id })
        end,
      }
    ]] })
    local host = helper.host_start({ "--redis", c.url }, { dir = dir })
    host:wait_log(READY, 30, { plain = true })
    local want, N = {}, 40
    for id = 1, N do
      local acct = account(id)
      local code, out, err = helper.luastream("publish", "--redis", c.url, "orders",
        string.format('{"id":%d,"account":"%s","cents":%d}', id, acct, amount(id)),
        "--key", acct, "--partitions", "8")
      assert.equal(0, code, out .. err)
      want[acct] = (want[acct] or 0) + amount(id)
    end
    processes.wait_until(function()
      local n = 0
      for p = 0, 7 do n = n + (c:call("XLEN", "orders.done:{" .. p .. "}") or 0) end
      return n >= N, n .. " replies"
    end, 30, "every order handled")
    local got, masters = {}, {}
    for p = 0, 7 do
      for k, v in pairs(assert(c:call("HGETALL", "totals:{" .. p .. "}"))) do
        assert.is_nil(got[k], k .. " in two partitions")
        got[k] = tonumber(v)
      end
      assert.same({}, assert(c:call("XPENDING", "orders:{" .. p .. "}", "count", "-", "+", "10")))
      masters[c:master_of("orders:{" .. p .. "}").port] = true
    end
    assert.same(want, got)
    local n = 0
    for _ in pairs(masters) do n = n + 1 end
    assert.equal(3, n, "the 8 partitions live on every master")
    assert.equal(0, host:stop())
  end)

  it("carries on after its master fails over, every payment posted exactly once #slow", function()
    local c = cluster.start { masters = 3, replicas = 1 }
    local N = 4000
    make_group(c)
    c:run(payments(1, N / 2))
    local master = c:master_of(STREAM)
    -- the entries are on the replica before the master dies
    assert.equal(1, tonumber(master:cli("WAIT", "1", "5000")))
    local host = start_host(c)
    host:wait_records(POSTED, 50, 30, "the host busy with the backlog")
    local mark = host:mark()
    master:kill()
    host:wait_log('msg="redis cluster slot map"', 30, { plain = true, after = mark })
    c:wait_ok(30)
    c:run(payments(N / 2 + 1, N))
    processes.wait_until(function()
      local pending = c:call("XPENDING", STREAM, "ledger")
      local len = c:call("XLEN", STREAM .. ".posted")
      return pending and pending[1] == 0 and (len or 0) >= N, tostring(len) .. " replies"
    end, 60, "every payment posted after the failover")
    assert_ledger_exact(c, N)
    assert.equal(0, host:stop())
  end)

  it("follows its stream's slot to another master while it moves, losing nothing", function()
    local c = cluster.start { masters = 3 }
    local N = 3000
    make_group(c)
    c:run(payments(1, N / 3))
    local host = start_host(c)
    local from = c:master_of(STREAM)
    local to = from == c.nodes[1] and c.nodes[2] or c.nodes[1]
    host:wait_records(POSTED, 20, 30, "the host busy")
    -- every slot of the stream's master moves, the stream's among them,
    -- while payments keep coming
    local reshard = processes.spawn({ "redis-cli", "--cluster", "reshard", "127.0.0.1:" .. from.port,
      "--cluster-from", c:id_of(from), "--cluster-to", c:id_of(to), "--cluster-slots", "16384",
      "--cluster-yes", "--cluster-pipeline", "100" }, { stdout = helper.tmpdir("reshard") .. "/out" })
    for first = N / 3 + 1, N, 100 do c:run(payments(first, first + 99)) end
    assert.equal(0, reshard:wait(120))
    c:wait_ok(30)
    assert.equal(to.port, (c:master_of(STREAM)).port, "the stream moved")
    processes.wait_until(function()
      local pending = c:call("XPENDING", STREAM, "ledger")
      local len = c:call("XLEN", STREAM .. ".posted")
      return pending and pending[1] == 0 and (len or 0) >= N, tostring(len) .. " replies"
    end, 60, "every payment posted after the migration")
    assert_ledger_exact(c, N)
    assert.truthy(host:count { msg = "redis cluster slot map" } >= 2, "the host saw the new map")
    assert.equal(0, host:stop())
  end)

  it("lists, replays and deletes dead letters on the master of their slot; publish --wait is refused", function()
    local c = cluster.start { masters = 3 }
    local dl = STREAM .. ".dead"
    assert.is_not.equal(c.nodes[1].port, (c:master_of(dl)).port, "the dead letters are not on the seed node")
    local dir = helper.handlers_dir({
      ["post.lua"] = [[return { stream = "{payments}", group = "ledger", dead_letter = "{payments}.dead", handle = function() end }]],
    })
    local cmds = {}
    for i, reason in ipairs { "rejected", "rejected", "decode-error", "rejected" } do
      cmds[i] = { "XADD", dl, "*", "data", "{}", "dead-letter-stream", STREAM, "dead-letter-group", "ledger",
        "dead-letter-id", i .. "-0", "dead-letter-reason", reason }
    end
    c:run(cmds)
    local ids = {}
    for i, e in ipairs(assert(c:call("XRANGE", dl, "-", "+"))) do ids[i] = e[1] end
    assert.equal(4, #ids)
    local code, out, err = helper.luastream("dead-letters", "list", "--redis", c.url, dl)
    assert.equal(0, code, out .. err)
    assert.matches("4 dead letters on " .. dl, out, 1, true)
    code, out, err = helper.luastream("dead-letters", "replay", "--redis", c.url, dir, dl, "--id", ids[1])
    assert.equal(0, code, out .. err)
    assert.matches(ids[1] .. " -> {payments}:retry:ledger ", out, 1, true)
    assert.equal(1, assert(c:call("XLEN", STREAM .. ":retry:ledger")))
    code, out, err = helper.luastream("dead-letters", "delete", "--redis", c.url, dl, "--reason", "decode-error", "--yes")
    assert.equal(0, code, out .. err)
    assert.matches("deleted 1 dead letter of reason decode-error from " .. dl, out, 1, true)
    code, out, err = helper.luastream("dead-letters", "delete", "--redis", c.url, dl, "--all", "--yes")
    assert.equal(0, code, out .. err)
    assert.matches("deleted 2 dead letters from " .. dl, out, 1, true)
    assert.equal(0, assert(c:call("XLEN", dl)))

    code, out, err = helper.luastream("publish", "--redis", c.url, STREAM, "{}", "--wait", "1")
    assert.equal(2, code, out .. err)
    assert.matches("--wait is not supported on a Redis Cluster", err, 1, true)
    assert.equal(0, assert(c:call("EXISTS", STREAM)))
  end)
  it("runs a scheduled handler's ticks, writes and publish in its name's slot, as docs/handlers.md shows #slow", function()
    local c = cluster.start { masters = 3 }
    -- docs/handlers.md's example, every second rather than at 03:00 on weekdays
    local text = helper.read_file(helper.repo_root .. "/docs/handlers.md")
    local example = assert(text:match("```lua\n(%-%- handlers/nightly_report%.lua\n.-)```"))
    example = example:gsub('cron = "[^"]*",[^\n]*\n', 'every = "1s",\n'):gsub('  tz = "[^"]*",[^\n]*\n', "")
    local dir = helper.handlers_dir({ ["nightly_report.lua"] = example })
    local host = helper.host_start({ "--redis", c.url }, { dir = dir })
    host:wait_log(READY, 30, { plain = true })
    local daily = assert(example:match('ctx:publish%("([^"]+)"'))
    helper.wait_until(function()
      return (tonumber(c:call("XLEN", daily)) or 0) >= 2, host:log()
    end, 20, "two ticks published")
    assert.equal("ok", c:call("HGET", "luastream:tick:{nightly_report}", "last_outcome"))
    assert.equal(0, #host:records({ msg = "tick failed" }), host:log())
    assert.equal(0, host:stop())

    -- a key of another slot fails the tick, naming the schedule's key
    local other = helper.handlers_dir({ ["nightly_report.lua"] = example:gsub("{nightly_report}:daily", "{reports}:daily") })
    local h2 = helper.host_start({ "--redis", c.url }, { dir = other })
    h2:wait_log(READY, 30, { plain = true })
    h2:wait_log('ctx:publish: key \\"{reports}:daily\\" (hash slot 5152) is not in the slot of the schedule\'s key '
      .. '\\"luastream:tick:{nightly_report}\\" (hash slot 16349)', 20, { plain = true })
    assert.truthy(h2:log():find("give the key the hash tag {nightly_report}", 1, true), h2:log())
    assert.equal(0, h2:stop())
  end)
end)
