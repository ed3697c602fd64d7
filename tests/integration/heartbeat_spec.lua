-- The heartbeat on a real server (host/consumer/heartbeat.c): two hosts read
-- one group with claiming reads (claim_fallback on 7.0) and min_idle = 1s,
-- their handlers run 6 s each; no entry is taken from the host running it,
-- so none runs twice, and the ledger written with ctx:write is exact.
local helper = require "tests.integration.helper"

local READY = 'msg="host ready"'
local N = 40

local LONG = [[
local ls = require "luastream"

return {
  stream = "payments", group = "ledger",
  read = "claiming", claim_fallback = true, min_idle = "1s",
  workers = 40,
  handle = function(payment, ctx)
    ls.log.info("payment started", { payment_id = payment.id, entry_id = ctx.id })
    ls.sleep(6000)
    ctx:write("HINCRBY", "ledger:posted", tostring(payment.id), 1)
    return ls.ack()
  end,
}
]]

describe("the heartbeat", function()
  after_each(helper.cleanup)

  it("keeps a host's entries while its handlers run six times min_idle: none runs twice #slow", function()
    local srv = helper.redis_start()
    assert(srv:call("XGROUP", "CREATE", "payments", "ledger", "$", "MKSTREAM"))
    local dir = helper.handlers_dir({ ["long.lua"] = LONG })
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
    local runs = {}
    for _, host in ipairs({ a, b }) do
      for _, r in ipairs(host:records({ msg = "payment started" })) do
        runs[r.payment_id] = (runs[r.payment_id] or 0) + 1
      end
    end
    for id = 1, N do
      assert.equal(1, runs[tostring(id)], "payment " .. id .. " started " .. tostring(runs[tostring(id)]) .. " times")
      assert.equal("1", srv:call("HGET", "ledger:posted", tostring(id)))
    end
    assert.equal(0, a:stop())
    assert.equal(0, b:stop())
  end)
end)
