-- ls.redis.connect against two real redis-servers: a handler's calls go to
-- the second server (one reached with a password, which the log never
-- shows); when that server stops its calls fail with an error, the entry stays
-- pending and the host carries on; once it is back, calls work again.
local helper = require "tests.integration.helper"
local sys = require "tests.integration.support.sys"

local READY = 'msg="host ready"'

local LEDGER = [[
local ls = require "luastream"

local other = ls.redis.connect(OTHER_URL)

local ops = {}

function ops.post(p)
  local balance = other.call("HINCRBY", "balances", p.account, p.amount)
  local here = ls.redis.call("EXISTS", "balances")
  ls.log.info("posted", { payment_id = p.id, balance = balance, here = here })
end

function ops.probe(p)
  local v, err = other.pcall("PING")
  ls.log.info("probed", { payment_id = p.id, v = tostring(v and v.ok), err = err })
  other.call("PING") -- raises when the server is away: the entry stays pending
end

function ops.local_only(p)
  ls.log.info("local", { payment_id = p.id, n = ls.redis.call("INCR", "local") })
end

return {
  stream = "payments", group = "ledger", start = "beginning", workers = 8,
  handle = function(p) ops[p.op](p) end,
}
]]

local function publish(srv, body)
  return assert(srv:call("XADD", "payments", "*", "data", body))
end

local function ledger_dir(other)
  local src = LEDGER:gsub("OTHER_URL", string.format("%q", other.url .. "/3"))
  return helper.handlers_dir({ ["ledger.lua"] = src })
end

describe("ls.redis.connect on real servers", function()
  after_each(helper.cleanup)

  it("calls the second server; fails calls while it is down; works again once it is back", function()
    local srv = helper.redis_start()
    local other = helper.redis_start({ requirepass = "s3cret-pw" })
    local host = helper.host_start({}, { server = srv, dir = ledger_dir(other) })
    host:wait_log(READY, 20, { plain = true })

    for i = 1, 20 do
      publish(srv, string.format('{"op":"post","id":%d,"account":"a%d","amount":%d}', i, i % 2, i))
    end
    host:wait_records({ msg = "posted" }, 20, 20, "20 payments posted")
    for _, r in ipairs(host:records({ msg = "posted" })) do assert.equal("0", r.here) end
    -- a0 gets 2 + 4 + ... + 20, in db 3 of the second server only
    assert.equal("110", other:cli("-n", "3", "HGET", "balances", "a0"))
    assert.equal("100", other:cli("-n", "3", "HGET", "balances", "a1"))
    assert.equal("0", srv:cli("EXISTS", "balances"))
    helper.wait_until(function() return #srv:pending_ids("payments", "ledger") == 0 end, 10, "all acked")
    assert.equal(1, host:count({ msg = "connecting for handlers" }))

    other:stop()
    local id = publish(srv, '{"op":"probe","id":21}')
    local rec = host:wait_records({ msg = "probed" }, 1, 20, "the probe while the server is down")[1]
    assert.equal("nil", rec.v)
    assert.matches("^redis PING %(" .. other.url_redacted:gsub("%p", "%%%0") .. "/3%): ", rec.err)
    helper.wait_until(function() return host:count({ level = "error" }) >= 1 end, 10, "the handler error")
    assert.same({ id }, srv:pending_ids("payments", "ledger"))
    -- the host carries on: entries that do not need the second server are done
    publish(srv, '{"op":"local_only","id":22}')
    host:wait_records({ msg = "local" }, 1, 20, "a local call while the second server is down")
    assert.is_true(host:alive())

    other:restart()
    -- calls work again once the host has reconnected (its backoff: up to 5 s)
    local n = 22
    helper.wait_until(function()
      n = n + 1
      publish(srv, string.format('{"op":"post","id":%d,"account":"b","amount":1}', n))
      sys.pause(500)
      return host:count({ msg = "posted", balance = "1" }) >= 1
    end, 30, "a payment posted to the second server after its restart")
    helper.assert_no_secret("s3cret-pw", host:log())
    assert.equal(0, host:stop())
  end)
end)
