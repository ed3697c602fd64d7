-- ls.redis.call against a real redis-server: replies, error replies, many
-- handlers at once, and a connection killed under a call in flight, which
-- fails the call (never resent) while later calls work again.
local helper = require "tests.integration.helper"

local READY = 'msg="host ready"'

local LEDGER = [[
local ls = require "luastream"

local ops = {}

function ops.post(p)
  local n = ls.redis.call("INCR", "posted")
  local balance = ls.redis.call("HINCRBY", "balances", p.account, p.amount)
  local status = ls.redis.call("SET", "last", p.id)
  local missing = ls.redis.call("GET", "missing")
  ls.log.info("posted", { payment_id = p.id, n = n, balance = balance, status = status.ok,
                          missing = tostring(missing) })
end

function ops.wrongtype(p)
  local v, err = ls.redis.pcall("HGET", "last", "f")
  ls.log.info("pcall", { payment_id = p.id, v = tostring(v), err = err })
  ls.redis.call("HGET", "last", "f")
end

function ops.wait(p)
  ls.log.info("about to call", { payment_id = p.id })
  ls.sleep(3000) -- the test pauses writes on the server meanwhile
  local v, err = ls.redis.with_timeout("60s").pcall("SET", "paused", p.id)
  ls.log.info("waited", { payment_id = p.id, v = tostring(v), err = err })
end

return {
  stream = "payments", group = "ledger", start = "beginning", workers = 16,
  handle = function(p) ops[p.op](p) end,
}
]]

local function publish(srv, body)
  assert(srv:call("XADD", "payments", "*", "data", body))
end

describe("ls.redis.call on a real server", function()
  after_each(helper.cleanup)

  it("runs handlers' commands, returns replies and error replies", function()
    local srv = helper.redis_start()
    local host = helper.host_start({}, { server = srv, dir = helper.handlers_dir({ ["ledger.lua"] = LEDGER }) })
    host:wait_log(READY, 20, { plain = true })
    for i = 1, 40 do
      publish(srv, string.format('{"op":"post","id":%d,"account":"a%d","amount":%d}', i, i % 4, i))
    end
    local recs = host:wait_records({ msg = "posted" }, 40, 20, "40 payments posted")
    local ns = {}
    for _, r in ipairs(recs) do
      ns[tonumber(r.n)] = true
      assert.equal("OK", r.status)
      assert.equal("false", r.missing)
    end
    for i = 1, 40 do assert.is_true(ns[i], "INCR returned " .. i) end
    -- a0 gets 4, 8, ..., 40
    assert.equal("220", srv:cli("HGET", "balances", "a0"))
    helper.wait_until(function() return #srv:pending_ids("payments", "ledger") == 0 end, 10, "all acked")

    local id = srv:cli("XADD", "payments", "*", "data", '{"op":"wrongtype","id":99}')
    local rec = host:wait_records({ msg = "pcall" }, 1, 20, "the pcall")[1]
    assert.equal("nil", rec.v)
    assert.equal("WRONGTYPE Operation against a key holding the wrong kind of value", rec.err)
    host:wait_log("WRONGTYPE", 20, { plain = true })
    assert.same({ id }, srv:pending_ids("payments", "ledger"))
    assert.equal(0, host:stop())
  end)

  it("fails a call in flight when its connection is lost, and never resends it", function()
    local srv = helper.redis_start()
    local host = helper.host_start({}, { server = srv, dir = helper.handlers_dir({ ["ledger.lua"] = LEDGER }) })
    host:wait_log(READY, 20, { plain = true })
    publish(srv, '{"op":"wait","id":1}')
    host:wait_records({ msg = "about to call" }, 1, 20, "the handler running")
    -- writes wait on the server: the handler's SET stays in flight
    srv:cli("CLIENT", "PAUSE", "60000", "WRITE")
    finally(function() pcall(srv.cli, srv, "CLIENT", "UNPAUSE") end)
    helper.wait_until(function() return srv:blocked_clients("set") == 1 end, 20, "the SET in flight")
    srv:cli("CLIENT", "KILL", "TYPE", "normal")
    local rec = host:wait_records({ msg = "waited" }, 1, 20, "the call failed")[1]
    assert.equal("nil", rec.v)
    assert.matches("^redis SET: connection lost", rec.err)
    srv:cli("CLIENT", "UNPAUSE")
    -- calls work again once the host has reconnected; the SET was not sent again
    publish(srv, '{"op":"post","id":2,"account":"a","amount":5}')
    host:wait_records({ msg = "posted" }, 1, 30, "a payment posted after the reconnect")
    assert.equal("5", srv:cli("HGET", "balances", "a"))
    assert.equal("", srv:cli("GET", "paused"))
    assert.equal(0, host:stop())
  end)
end)
