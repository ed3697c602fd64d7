-- The hand-back on a real server (host/consumer/handback.c, from
-- stream_reader.c sr_stop): a host that lost its consumer name to another process stops,
-- and must leave the entries it read to the new holder of the name (which
-- runs that name's pending list, and may be running them already); giving
-- them back, idle since the epoch, lets any other host's claiming read run
-- them again at once.
local helper = require "tests.integration.helper"

local READY = 'msg="host ready"'

local QUEUE = [[
local ls = require "luastream"

return {
  stream = "jobs", group = "workers",
  read = "claiming", claim_fallback = true, min_idle = "60s",
  workers = 1,
  handle = function(job)
    ls.log.info("job started", { n = job.id })
    ls.sleep(3000)
    return ls.ack()
  end,
}
]]

describe("the hand-back", function()
  after_each(helper.cleanup)

  it("leaves the entries of a consumer name lost to another process pending as they were #slow", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["queue.lua"] = QUEUE })
    local a = helper.host_start({ "--consumer", "box" }, { server = srv, dir = dir })
    a:wait_log(READY, 20, { plain = true })
    srv:pipe(helper.payment_commands(1, 5, 5, "jobs"))
    helper.wait_until(function()
      local n = #assert(srv:call("XPENDING", "jobs", "workers", "-", "+", "100", "box"))
      return n == 5, n .. " pending for box"
    end, 20, "box to have read the 5")
    -- another process takes the name (as after a pause past the lease)
    local key = assert(srv:call("KEYS", "luastream:consumer:{jobs}:*"))[1]
    assert(key, "box's lease")
    srv:cli("SET", key, "x 1 other/1 elsewhere", "PX", "60000")
    assert.equal(1, a:wait_exit(20))
    assert.equal(1, a:count({ msg = "consumer lease lost to another process: stopped reading" }))
    for _, p in ipairs(assert(srv:call("XPENDING", "jobs", "workers", "-", "+", "100"))) do
      assert.equal("box", p[2])
      assert.is_true(tonumber(p[3]) < 60000, p[1] .. " idle " .. tostring(p[3]) .. " ms: claimable by any host now")
      assert.equal(1, tonumber(p[4]), p[1] .. " delivery count changed")
    end
    assert.equal(0, a:count({ msg = "entries read but not started given back" }))
  end)
end)
