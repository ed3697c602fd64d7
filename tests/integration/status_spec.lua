-- `luastream status` against a real redis-server (7.0 in the suite): a
-- consumer that holds entries and whose host is gone or paused is flagged
-- (exit 1), a running host is not, even while Redis 7.0 lets its idle time
-- grow between empty reads; entries a `new` handler left pending that nothing
-- retries are; dead letters are, --json field by field, streams named
-- without DIR (every group, a missing stream), --watch's repeated blocks
-- until SIGINT, and a server that is not there.
local helper = require "tests.integration.helper"
local cjson = require "cjson"

local READY = 'msg="host ready"'

-- min_idle 300ms: a consumer holding entries is stalled 300 ms after its last read.
local POST = [[
return {
  stream = "payments", group = "ledger", read = "claiming", claim_fallback = true, min_idle = "300ms",
  dead_letter = "payments.dead",
  handle = function(payment, ctx) end,
}
]]

local function status(srv, ...)
  local args = { "status", "--redis", srv.url, ... }
  return helper.luastream(unpack(args))
end

local function status_json(srv, ...)
  local code, out, err = status(srv, "--json", ...)
  local ok, doc = pcall(cjson.decode, out)
  assert(ok, "not JSON: " .. out .. err)
  return code, doc, out
end

-- A `new` handler that raises on {"op":"fail"}, leaving it pending.
local function failing(fields)
  return string.format([[
return {
  stream = "payments", group = "ledger", %s
  handle = function(p) if p.op == "fail" then error("refused") end end,
}
]], fields or "")
end

local function kinds(group)
  local k = {}
  for _, a in ipairs(group.attention) do k[#k + 1] = a.kind end
  table.sort(k)
  return table.concat(k, ",")
end

describe("luastream status", function()
  after_each(helper.cleanup)

  it("--help says what it shows and what the exit status means; usage errors exit 2", function()
    local code, out = helper.luastream("status", "--help")
    assert.equal(0, code)
    for _, s in ipairs { "--json", "--watch", "DIR | STREAM...", "min_idle", "Exit status: 0 when nothing needs attention, 1 when something does" } do
      assert.matches(s, out, 1, true)
    end
    code, out = helper.luastream("--help")
    assert.equal(0, code)
    assert.matches("status", out, 1, true)
    local _, err
    code, _, err = helper.luastream("status")
    assert.equal(2, code)
    assert.matches("missing arguments", err, 1, true)
    local dir = helper.handlers_dir { ["post.lua"] = POST }
    code, _, err = helper.luastream("status", dir, "payments")
    assert.equal(2, code)
    assert.matches("one DIR or stream names, not both", err, 1, true)
    code, _, err = helper.luastream("status", "--json=1", "payments")
    assert.equal(2, code)
    assert.matches("--json takes no value", err, 1, true)
  end)

  it("flags a consumer that holds pending entries past the handler's min_idle, and the entries nobody reads", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir { ["post.lua"] = POST }
    srv:cli("XGROUP", "CREATE", "payments", "ledger", "0", "MKSTREAM")
    local ids = {}
    for i = 1, 3 do ids[i] = srv:cli("XADD", "payments", "*", "data", helper.payment(i, "acme", 100)) end
    -- a consumer reads two entries and is never heard of again
    srv:cli("XREADGROUP", "GROUP", "ledger", "stuck", "COUNT", "2", "STREAMS", "payments", ">")

    local code, out, err
    helper.wait_until(function()
      code, out, err = status(srv, dir)
      return code == 1 and out:find("no consumer has read for", 1, true), out .. err
    end, 10, "status to flag the entries nobody reads")
    assert.equal("", err)
    assert.matches("payments  ledger       3    1        2", out, 1, true)
    assert.matches("needs attention:", out, 1, true)
    assert.matches("payments ledger: consumer stuck holds 2 pending entries and no running host holds "
      .. "its name (its lease is gone): the process stopped", out, 1, true)
    assert.matches("payments ledger: 1 entry waits and no consumer has read for ", out, 1, true)
    assert.matches("(past min_idle 300ms)", out, 1, true)
    assert.matches("stuck +2 +[%d.]+m?s +none\n", out)

    local doc
    code, doc = status_json(srv, dir)
    assert.equal(1, code)
    assert.equal(srv.url, doc.server)
    assert.is_true(doc.attention)
    assert.is_number(doc.time_ms)
    assert.equal(1, #doc.groups)
    local g = doc.groups[1]
    assert.equal("payments", g.stream)
    assert.equal("ledger", g.group)
    assert.equal("post.lua", g.handlers)
    assert.equal(300, g.min_idle_ms)
    assert.equal(300, g.stall_after_ms)
    assert.equal(3, g.length)
    assert.is_true(g.source.exists)
    assert.is_true(g.source.group_exists)
    assert.equal(3, g.source.length)
    assert.equal(1, g.source.lag)
    assert.equal(2, g.source.pending)
    assert.is_true(g.source.oldest_pending_idle_ms >= 300)
    assert.equal(ids[2], g.source.last_delivered_id)
    assert.equal(cjson.null, g.source.error)
    assert.equal("payments:retry:ledger", g.retry.stream)
    assert.is_false(g.retry.exists)
    assert.equal(cjson.null, g.retry.lag)
    assert.equal(0, g.delayed)
    assert.same({ stream = "payments.dead", length = 0 }, g.dead_letter)
    assert.equal(1, #g.consumers)
    assert.equal("stuck", g.consumers[1].name)
    assert.equal(2, g.consumers[1].pending)
    assert.is_true(g.consumers[1].idle_ms >= 300)
    assert.equal(cjson.null, g.consumers[1].lease_renewed_ms_ago)
    assert.is_true(g.consumers[1].stalled)
    assert.equal("stalled-consumer,unread", kinds(g))
  end)

  it("says nothing needs attention while a host keeps up, and flags dead letters", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir { ["post.lua"] = POST }
    local host = helper.host_start({}, { server = srv, dir = dir })
    host:wait_log(READY, 20, { plain = true })
    for i = 1, 5 do helper.publish(srv, "payments", helper.payment(i, "acme", 100)) end
    helper.wait_until(function()
      local info = srv:call("XINFO", "GROUPS", "payments")
      return info and info[1] and info[1].pending == 0 and info[1]["entries-read"] == 5
    end, 10, "the host to handle the 5 entries")

    local code, out, err = status(srv, dir)
    assert.equal(0, code, out .. err)
    assert.matches("nothing needs attention", out, 1, true)
    assert.matches("payments:retry:ledger", out, 1, true) -- the host made the retry stream's group
    local doc
    code, doc = status_json(srv, dir)
    assert.equal(0, code)
    assert.is_false(doc.attention)
    local g = doc.groups[1]
    assert.equal(5, g.source.length)
    assert.equal(0, g.source.lag)
    assert.equal(0, g.source.pending)
    assert.equal(cjson.null, g.source.oldest_pending_idle_ms)
    assert.is_true(g.retry.exists)
    assert.is_true(g.retry.group_exists)
    assert.equal(1, #g.consumers)
    assert.equal(0, g.consumers[1].pending)
    assert.is_true(g.consumers[1].lease_renewed_ms_ago < 10000)
    assert.is_false(g.consumers[1].stalled)
    assert.same({}, g.attention)

    srv:cli("XADD", "payments.dead", "*", "data", "{}")
    code, doc = status_json(srv, dir)
    assert.equal(1, code)
    assert.equal(1, doc.groups[1].dead_letter.length)
    assert.equal("dead-letters", kinds(doc.groups[1]))
    assert.matches("1 dead letter on payments.dead", doc.groups[1].attention[1].message, 1, true)
    assert.equal(0, host:stop())
  end)

  it("does not call a reading host stalled while its idle time grows (Redis 7.0), and says what nothing retries", function()
    local srv = helper.redis_start()
    -- min_idle 5s: the stall limit, above the 4 s a `new` read blocks
    local dir = helper.handlers_dir { ["post.lua"] = failing('min_idle = "5s",') }
    local host = helper.host_start({}, { server = srv, dir = dir })
    host:wait_log(READY, 20, { plain = true })
    helper.publish(srv, "payments", '{"op":"fail"}')
    host:wait_log('msg="handler failed, entry left pending"', 20, { plain = true })
    -- the host keeps reading (blocking reads that find nothing); Redis 7.0
    -- does not count those as reads
    local consumer
    helper.wait_until(function()
      consumer = srv:call("XINFO", "CONSUMERS", "payments", "ledger")[1]
      return consumer.idle > 6000, "idle " .. consumer.idle
    end, 20, "the consumer's idle time past the stall limit")
    assert.is_true(host:alive())

    local code, doc = status_json(srv, dir)
    assert.equal(1, code)
    local g = doc.groups[1]
    assert.equal("unretried", kinds(g))
    assert.equal(1, #g.consumers)
    assert.equal(consumer.name, g.consumers[1].name)
    assert.equal(1, g.consumers[1].pending)
    assert.is_true(g.consumers[1].idle_ms > 6000)
    assert.is_true(g.consumers[1].lease_renewed_ms_ago < 10000)
    assert.is_false(g.consumers[1].stalled)
    local out, err
    code, out, err = status(srv, dir)
    assert.equal(1, code, out .. err)
    assert.is_nil(out:find("stalled", 1, true), out)
    assert.matches("LEASE RENEWED", out, 1, true)
    assert.matches("payments ledger: 1 pending entry (the first idle for ", out, 1, true)
    assert.matches(', past min_idle 5s) and no handler of the group claims pending entries: read = "new" takes an '
      .. "entry again only when its consumer's host starts again under the same name. Add a handler with "
      .. 'read = "reclaim" and min_idle for the group, or read = "claiming"\n', out, 1, true)
    assert.equal(0, host:stop())
  end)

  it("calls a host stalled once its lease is not renewed (paused) or gone (stopped)", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir { ["post.lua"] = failing() }
    local host = helper.host_start({}, { server = srv, dir = dir })
    host:wait_log(READY, 20, { plain = true })
    helper.publish(srv, "payments", '{"op":"fail"}')
    host:wait_log('msg="handler failed, entry left pending"', 20, { plain = true })
    local code, doc = status_json(srv, dir)
    assert.equal(0, code) -- not yet past the default stall limit, 60 s
    assert.is_false(doc.groups[1].consumers[1].stalled)

    host:signal("STOP")
    local out, err
    helper.wait_until(function()
      code, out, err = status(srv, dir)
      return code == 1 and out:find("its lease was last renewed", 1, true),
        out .. err
    end, 20, "status to flag the paused host")
    assert.matches("payments ledger: consumer [^ ]+ holds 1 pending entry and its lease was last renewed "
      .. "1?%d[.%d]*s ago %(every 5s while its host runs%): the process is stopped, paused or stalled\n", out)
    host:signal("CONT")
    helper.wait_until(function()
      code, doc = status_json(srv, dir)
      return code == 0, cjson.encode(doc)
    end, 20, "the host renewing its lease again")

    assert.equal(0, host:stop())
    code, doc = status_json(srv, dir)
    assert.equal(1, code)
    local g = doc.groups[1]
    assert.equal("stalled-consumer", kinds(g))
    assert.is_true(g.consumers[1].stalled)
    assert.equal(cjson.null, g.consumers[1].lease_renewed_ms_ago)
    assert.matches("holds 1 pending entry and no running host holds its name (its lease is gone): the process stopped",
      g.attention[1].message, 1, true)
  end)

  it("shows every group of the streams named, and a missing stream", function()
    local srv = helper.redis_start()
    srv:cli("XGROUP", "CREATE", "orders", "ship", "0", "MKSTREAM")
    srv:cli("XGROUP", "CREATE", "orders", "bill", "0")
    srv:cli("XADD", "orders", "*", "data", "{}")
    srv:cli("XREADGROUP", "GROUP", "bill", "b1", "STREAMS", "orders", ">")
    srv:cli("XACK", "orders", "bill", srv:xrange("orders")[1].id)

    local code, doc = status_json(srv, "orders")
    -- ship has never been read: an entry waits and the group has no consumer
    assert.equal(1, code)
    assert.equal(2, #doc.groups)
    local bill, ship = doc.groups[1], doc.groups[2]
    assert.equal("bill", bill.group)
    assert.equal("ship", ship.group)
    assert.equal(cjson.null, bill.handlers)
    assert.equal(cjson.null, bill.min_idle_ms)
    assert.equal(60000, bill.stall_after_ms)
    assert.equal(0, bill.source.lag)
    assert.equal("b1", bill.consumers[1].name)
    assert.same({}, bill.attention)
    assert.equal(1, ship.source.lag)
    assert.equal(0, #ship.consumers)
    assert.equal("unread", kinds(ship))
    assert.equal("1 entry waits and the group has no consumer", ship.attention[1].message)

    srv:cli("XREADGROUP", "GROUP", "ship", "s1", "STREAMS", "orders", ">")
    srv:cli("XACK", "orders", "ship", srv:xrange("orders")[1].id)
    local out, err
    code, out, err = status(srv, "orders")
    assert.equal(0, code, out .. err)
    assert.matches("nothing needs attention", out, 1, true)

    code, out = status(srv, "orders", "nothere")
    assert.equal(1, code)
    assert.matches("nothere  -  ", out, 1, true)
    assert.matches("missing", out, 1, true)
    assert.matches("  stream nothere does not exist\n", out, 1, true)
    code, doc = status_json(srv, "nothere")
    assert.equal(1, code)
    assert.equal(cjson.null, doc.groups[1].group)
    assert.is_false(doc.groups[1].source.exists)
    assert.equal("missing-stream", kinds(doc.groups[1]))
  end)

  it("--watch prints a block every 2 s until SIGINT, then exits with the last block's status", function()
    local srv = helper.redis_start()
    srv:cli("XGROUP", "CREATE", "orders", "ship", "$", "MKSTREAM")
    local out = os.tmpname()
    local p = helper.spawn({ helper.bin(), "status", "--watch", "--redis", srv.url, "orders" },
      { stdout = out, env = { REDIS_URL = false } })
    helper.wait_until(function()
      local _, n = helper.read_file(out):gsub("nothing needs attention", "")
      return n >= 2, n .. " blocks"
    end, 10, "two blocks")
    p:kill("INT")
    assert.equal(0, p:wait(5))
    local text = helper.read_file(out)
    os.remove(out)
    assert.is_nil(text:find("\027[", 1, true)) -- not a terminal: no escape codes
    assert.matches("(every 2s; Ctrl-C stops)", text, 1, true)
  end)

  it("names the server it cannot reach", function()
    local port = helper.free_port()
    local code, out, err = helper.luastream("status", "--redis", "redis://127.0.0.1:" .. port, "orders")
    assert.equal(1, code)
    assert.equal("", out)
    assert.matches("luastream: cannot reach redis://127.0.0.1:" .. port, err, 1, true)
  end)
end)
