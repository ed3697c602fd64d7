-- A host that stops because its consumer lease went to another process
-- (msg="consumer lease lost to another process: stopped reading") lets its
-- running handlers finish; a SIGTERM then must still bound that drain by
-- --shutdown-timeout (docs/operations.md, "Stopping"), as for any stop.
local helper = require "tests.integration.helper"

local READY = 'msg="host ready"'

local SLOW = [[
local ls = require "luastream"
return {
  stream = "payments", group = "ledger",
  handle = function(p)
    ls.log.info("payment started", {})
    ls.sleep(60000)
  end,
}
]]

describe("a host stopping after its consumer lease was lost", function()
  after_each(helper.cleanup)

  it("abandons its running handlers at --shutdown-timeout after a SIGTERM #slow", function()
    local srv = helper.redis_start()
    assert(srv:call("XGROUP", "CREATE", "payments", "ledger", "$", "MKSTREAM"))
    local dir = helper.handlers_dir({ ["post.lua"] = SLOW })
    local host = helper.host_start({ "--consumer", "host-a", "--shutdown-timeout", "1s" },
      { server = srv, dir = dir })
    host:wait_log(READY, 20, { plain = true })
    srv:call("XADD", "payments", "*", "data", "{}")
    host:wait_log('msg="payment started"', 10, { plain = true })
    -- another process takes the name: the next renewal (every 5 s) finds it
    local keys = srv:call("KEYS", "luastream:consumer:*")
    assert.equal(1, #keys)
    srv:call("SET", keys[1], "someone else")
    host:wait_log('msg="consumer lease lost to another process: stopped reading"', 15, { plain = true })
    host:signal("TERM")
    local started = helper.now()
    local code = host:wait_exit(20) -- the handler sleeps 60 s; the deadline is 1 s
    assert.is_true(helper.now() - started < 10, "took " .. (helper.now() - started) .. " s")
    assert.equal(1, host:count({ msg = "shutdown deadline reached" }))
    assert.equal(1, code) -- failed: the lease was lost
    -- the abandoned entry is the name's new holder's: not given back
    assert.equal(1, #srv:pending_ids("payments", "ledger"))
    assert.equal(0, srv:xlen("payments:retry:ledger"))
    assert.equal(1, host:count({ msg = "shutdown deadline: handlers abandoned, entries stay pending" }))
  end)
end)
