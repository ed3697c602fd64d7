-- Redis away: at start-up the host reports the server and keeps trying until
-- it appears; a server lost later is reconnected to and nothing is lost.
local helper = require "tests.integration.helper"

local READY = 'msg="host ready"'
local POSTED = { msg = "payment posted" }

local POST = [[
local ls = require "luastream"

return {
  stream = "payments", group = "ledger", start = "beginning",
  handle = function(payment, ctx)
    ls.log.info("payment posted", { payment_id = payment.id })
  end,
}
]]

local function publish(srv, first, last)
  srv:pipe(helper.payment_commands(first, last, 3))
end

-- Each of payments first..last posted exactly once.
local function assert_posted_once(host, first, last)
  local times = {}
  for _, rec in ipairs(host:records(POSTED)) do
    times[rec.payment_id] = (times[rec.payment_id] or 0) + 1
  end
  for id = first, last do
    assert.equal(1, times[tostring(id)] or 0, "times payment " .. id .. " was posted")
  end
end

describe("redis outages", function()
  after_each(helper.cleanup)

  it("keeps trying a server that is not there yet, then starts", function()
    local port = helper.free_port()
    local address = "127.0.0.1:" .. port
    local host = helper.host_start({}, {
      url = "redis://" .. address, log_level = "debug",
      dir = helper.handlers_dir({ ["post.lua"] = POST }),
    })
    local first = host:wait_records(function(r)
      return r.level == "error" and r._line:find(address, 1, true) ~= nil
    end, 1, 20, "an error naming " .. address)[1]
    -- it keeps trying: more lines about the server follow the first error
    host:wait_records(function(r)
      return r._pos > first._pos and r._line:find(address, 1, true) ~= nil
    end, 1, 20, "another attempt at " .. address)
    assert.is_true(host:alive())
    assert.equal(0, host:count({ msg = "host ready" }))

    local srv = helper.redis_start({ port = port })
    host:wait_log(READY, 30, { plain = true })
    publish(srv, 1, 1)
    host:wait_records(POSTED, 1, 20, "the payment posted")
    assert.equal(0, host:stop())
  end)

  it("reconnects to a server that was killed and restarted, losing nothing", function()
    -- appendfsync always: what Redis answered is in the AOF when it is killed
    -- (everysec may postpone the write on a busy machine: the group, the acks)
    local srv = helper.redis_start({ appendonly = true, args = { "--appendfsync", "always" } })
    local address = "127.0.0.1:" .. srv.port
    local host = helper.host_start({}, { server = srv, dir = helper.handlers_dir({ ["post.lua"] = POST }) })
    host:wait_log(READY, 20, { plain = true })
    publish(srv, 1, 5)
    host:wait_records(POSTED, 5, 20, "5 payments posted before the crash")
    -- their acks are in the AOF before the crash
    helper.wait_until(function()
      local ids = srv:pending_ids("payments", "ledger")
      return #ids == 0, #ids .. " pending"
    end, 10, "every posted payment acked")

    local before = host:mark()
    srv:kill()
    local lost = host:wait_records(function(r)
      return r._pos > before and (r.level == "warn" or r.level == "error")
    end, 1, 20, "the lost connection logged")[1]

    srv:restart()
    -- published at once, whether or not the host is back yet
    publish(srv, 6, 10)
    host:wait_records(POSTED, 10, 30, "the payments published after the restart posted")
    host:wait_records(function(r)
      return r._pos > lost._pos and r.level == "info" and r._line:find(address, 1, true) ~= nil
    end, 1, 10, "the reconnection logged, naming the server")
    assert.is_true(host:alive())
    assert.equal(0, host:stop())

    assert_posted_once(host, 1, 10)
    assert.same({}, (srv:pending_ids("payments", "ledger")))
  end)
end)
