-- SIGTERM / SIGINT: the host stops reading, lets running handlers finish,
-- flushes their acks and exits 0. Acked means handled, and handled means acked.
local helper = require "tests.integration.helper"
local cjson = require "cjson"

local READY = 'msg="host ready"'

local SLOW = [[
local ls = require "luastream"

return {
  stream = "payments", group = "ledger",
  workers = 8, by_key = true,
  handle = function(payment, ctx)
    ls.log.info("payment started", { payment_id = payment.id })
    ls.sleep(300)
    ls.log.info("payment posted", { payment_id = payment.id })
  end,
}
]]

local function ids_of(records)
  local set, n = {}, 0
  for _, rec in ipairs(records) do
    set[rec.payment_id] = true
    n = n + 1
  end
  return set, n
end

describe("stopping the host", function()
  after_each(helper.cleanup)

  it("on SIGTERM finishes the sleeping handlers, acks exactly what was handled, exits 0", function()
    local srv = helper.redis_start()
    local host = helper.host_start({}, { server = srv, dir = helper.handlers_dir({ ["post_slowly.lua"] = SLOW }) })
    host:wait_log(READY, 20, { plain = true })
    local N = 40
    srv:pipe(helper.payment_commands(1, N, 8))

    host:wait_records({ msg = "payment started" }, 4, 20, "handlers asleep")
    local t0 = helper.now()
    host:signal("TERM")
    assert.equal(0, host:wait_exit(15))
    assert(helper.now() - t0 < 10, "the host took more than 10 s to stop")

    local started = ids_of(host:records({ msg = "payment started" }))
    local posted, nposted = ids_of(host:records({ msg = "payment posted" }))
    for id in pairs(started) do
      assert(posted[id], "payment " .. id .. " was started but not finished")
    end
    assert.is_true(nposted >= 4)

    -- acked = delivered to the group (up to last-delivered-id) and not
    -- pending; those read and never started were given back: copied to the
    -- group's retry stream, then acked here
    local last = assert(srv:group("payments", "ledger"))["last-delivered-id"]
    local _, pending = srv:pending_ids("payments", "ledger")
    local given = {}
    for _, c in ipairs(srv:xrange("payments:retry:ledger")) do given[c.fields["original-id"]] = true end
    for _, e in ipairs(srv:xrange("payments")) do
      local id = tostring(cjson.decode(e.fields.data).id)
      local acked = helper.id_cmp(e.id, last) <= 0 and not pending[e.id]
      if posted[id] then
        assert(acked, "payment " .. id .. " was posted but not acked")
        assert(not given[e.id], "payment " .. id .. " was posted and given back")
      elseif given[e.id] then
        assert(acked, "payment " .. id .. " was given back but not acked")
      else
        assert(not acked, "payment " .. id .. " was acked but never posted nor given back")
      end
    end
  end)

  -- GNU timeout (like a service manager) sends SIGTERM to its child and then
  -- to the whole process group: one stop, not a second signal.
  it("under GNU timeout (SIGTERM to the child, then to its group) drains and exits 0", function()
    local srv = helper.redis_start()
    local host = helper.host_start({}, {
      server = srv, dir = helper.handlers_dir({ ["post_slowly.lua"] = SLOW }),
      wrap = { "timeout", "--preserve-status", "-s", "TERM", "600" },
    })
    host:wait_log(READY, 20, { plain = true })
    srv:pipe(helper.payment_commands(1, 8, 8))
    host:wait_records({ msg = "payment started" }, 4, 20, "handlers asleep")
    host:signal("TERM") -- to timeout, which passes it on twice (the kernel may merge the two)
    assert.equal(0, host:wait_exit(15))
    assert.equal(1, host:count({ msg = "signal received" }))
    assert.equal(0, host:count({ msg = "second signal: exiting now" }))
    local started = ids_of(host:records({ msg = "payment started" }))
    local posted = ids_of(host:records({ msg = "payment posted" }))
    for id in pairs(started) do
      assert(posted[id], "payment " .. id .. " was started but not finished")
    end
    assert.same({}, (srv:pending_ids("payments", "ledger")))
  end)

  -- The same as timeout's two signals, each surely delivered: the second
  -- comes once the first is logged (well within the 1 s window).
  it("takes the same SIGTERM again right after the first as the same stop, and exits 0", function()
    local srv = helper.redis_start()
    local host = helper.host_start({}, { server = srv, dir = helper.handlers_dir({ ["post_slowly.lua"] = SLOW }) })
    host:wait_log(READY, 20, { plain = true })
    srv:pipe(helper.payment_commands(1, 8, 8))
    host:wait_records({ msg = "payment started" }, 4, 20, "handlers asleep")
    host:signal("TERM")
    host:wait_records({ msg = "signal received" }, 1, 5, "the first signal")
    host:signal("TERM")
    assert.equal(0, host:wait_exit(15))
    assert.equal(1, host:count({ msg = "the same signal again: still stopping" }))
    assert.equal(0, host:count({ msg = "second signal: exiting now" }))
    local started = ids_of(host:records({ msg = "payment started" }))
    local posted = ids_of(host:records({ msg = "payment posted" }))
    for id in pairs(started) do
      assert(posted[id], "payment " .. id .. " was started but not finished")
    end
    assert.same({}, (srv:pending_ids("payments", "ledger")))
  end)

  it("with --processes takes the same SIGTERM again right after the first as the same stop", function()
    local srv = helper.redis_start()
    local host = helper.host_start({ "--processes", "2" }, {
      server = srv, dir = helper.handlers_dir({ ["post_slowly.lua"] = SLOW }),
    })
    host:wait_records({ msg = "host ready" }, 2, 30, "both workers ready")
    srv:pipe(helper.payment_commands(1, 8, 8))
    host:wait_records({ msg = "payment started" }, 2, 20, "handlers asleep")
    host:signal("TERM")
    host:wait_records({ msg = "signal received: stopping every worker" }, 1, 5, "the first signal")
    host:signal("TERM")
    assert.equal(0, host:wait_exit(15))
    assert.equal(1, host:count({ msg = "the same signal again: still stopping" }))
    assert.equal(0, host:count({ msg = "second signal: killing every worker (SIGKILL)" }))
    assert.equal(1, host:count({ msg = "every worker stopped", status = "0" }))
    local started = ids_of(host:records({ msg = "payment started" }))
    local posted = ids_of(host:records({ msg = "payment posted" }))
    for id in pairs(started) do
      assert(posted[id], "payment " .. id .. " was started but not finished")
    end
  end)

  it("on SIGINT exits 0", function()
    local srv = helper.redis_start()
    local host = helper.host_start({}, { server = srv, dir = helper.handlers_dir({ ["post_slowly.lua"] = SLOW }) })
    host:wait_log(READY, 20, { plain = true })
    srv:pipe(helper.payment_commands(1, 1, 1))
    host:wait_records({ msg = "payment started" }, 1, 20, "the handler asleep")
    host:signal("INT")
    assert.equal(0, host:wait_exit(15))
    assert.equal(1, host:count({ msg = "payment posted" }))
    assert.same({}, (srv:pending_ids("payments", "ledger")))
  end)
end)
