-- The heartbeat on a real server (host/consumer/heartbeat.c): an
-- entry deleted from the stream while its handler runs (a producer's
-- MAXLEN, an XDEL) still gets its outcome written, as without a heartbeat:
-- Redis 7.0's XCLAIM drops a deleted entry from the pending list, after
-- which the outcome's XACK finds nothing and writes none of its commands
-- (min_idle 6 s: beats at 2 and 4 s fall in the handler's 3 s, and no
-- claiming read takes the entry before it is done).
local helper = require "tests.integration.helper"

local READY = 'msg="host ready"'

local LONG = [[
local ls = require "luastream"

return {
  stream = "jobs", group = "workers",
  read = "claiming", claim_fallback = true, min_idle = "6s",
  reply_to = "jobs.done",
  handle = function(job, ctx)
    ctx:publish("jobs.audit", { n = job.id })
    ls.log.info("job started", { n = job.id, entry_id = ctx.id })
    ls.sleep(3000)
    return ls.reply({ n = job.id })
  end,
}
]]

describe("the heartbeat", function()
  after_each(helper.cleanup)

  it("leaves the outcome of an entry deleted while its handler runs to be written #slow", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["long.lua"] = LONG })
    local a = helper.host_start({ "--consumer", "host-a" }, { server = srv, dir = dir })
    a:wait_log(READY, 20, { plain = true })
    srv:pipe(helper.payment_commands(1, 1, 5, "jobs"))
    local started = a:wait_records({ msg = "job started" }, 1, 10, "the job to start")
    assert.equal(1, srv:call("XDEL", "jobs", started[1].entry_id))
    helper.wait_until(function()
      return a:count({ msg = "job started" }) == 1 and
        #assert(srv:call("XPENDING", "jobs", "workers", "-", "+", "10")) == 0, "still pending"
    end, 10, "the job done")
    helper.wait_until(function()
      return srv:call("XLEN", "jobs.done") == 1, "no reply"
    end, 3, "the reply written")
    assert.equal(1, srv:call("XLEN", "jobs.audit"), "the handler's publish written")
    assert.equal(0, a:stop())
  end)
end)
