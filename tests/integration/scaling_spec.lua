-- Two instances of the service share one consumer group: each payment is posted
-- by exactly one of them, and both do part of the work.
local helper = require "tests.integration.helper"

local READY = 'msg="host ready"'
local POSTED = { msg = "payment posted" }

describe("two hosts in one group", function()
  after_each(helper.cleanup)

  it("share the payments of group ledger, each handled exactly once", function()
    local srv = helper.redis_start()
    -- the shipped ledger handler alone (the folder's reclaim handler would be a
    -- second consumer in the same group)
    local dir = helper.handlers_dir({
      ["post_new_payment.lua"] = helper.read_file(helper.repo_root .. "/handlers/before-8.4/post_new_payment.lua"),
    })
    local a = helper.host_start({ "--consumer", "host-a" }, { server = srv, dir = dir })
    local b = helper.host_start({ "--consumer", "host-b" }, { server = srv, dir = dir })
    a:wait_log(READY, 20, { plain = true })
    b:wait_log(READY, 20, { plain = true })
    -- Both blocked in XREADGROUP: Redis then hands the first new entry to one and
    -- the next to the other, so both get work whatever the batch sizes.
    helper.wait_until(function()
      local n = srv:blocked_clients("xreadgroup")
      return n >= 2, n .. " blocked"
    end, 10, "both hosts blocked in XREADGROUP (CLIENT LIST flags=b)")

    local N = 300
    srv:pipe(helper.payment_commands(1, N, 10))
    helper.wait_until(function()
      local n = a:count(POSTED) + b:count(POSTED)
      return n >= N, n .. " posted"
    end, 30, N .. " payments posted across both hosts")
    assert.equal(0, a:stop())
    assert.equal(0, b:stop())

    local times = {}
    for _, host in ipairs { a, b } do
      for _, rec in ipairs(host:records(POSTED)) do
        times[rec.payment_id] = (times[rec.payment_id] or 0) + 1
      end
    end
    for id = 1, N do
      assert.equal(1, times[tostring(id)] or 0, "times payment " .. id .. " was posted")
    end
    assert.is_true(a:count(POSTED) > 0, "host-a posted nothing")
    assert.is_true(b:count(POSTED) > 0, "host-b posted nothing")

    local consumers = srv:consumers("payments", "ledger")
    assert.is_not_nil(consumers["host-a"], "host-a in XINFO CONSUMERS")
    assert.is_not_nil(consumers["host-b"], "host-b in XINFO CONSUMERS")
    assert.same({}, (srv:pending_ids("payments", "ledger")))
  end)
end)
