-- The hand-back of a host whose consumer name went to another process while
-- it was paused, before it could learn so: its lease not confirmed lately
-- (reader_handback.c sr_hand_back, as dispatch and reads in reader_loop.c:
-- name_held), it gives nothing back at SIGTERM after the pause. The
-- script's owner check could not tell (the name is the same), and the new
-- holder of the name, already running those entries, would run the copies a
-- second time.
local helper = require "tests.integration.helper"

local READY = 'msg="host ready"'
local RETRY = "jobs:retry:workers"

local QUEUE = [[
local ls = require "luastream"

return {
  stream = "jobs", group = "workers",
  batch = 5, workers = tonumber(os.getenv("LANES")),
  handle = function(job, ctx)
    ls.log.info("job started", { n = job.id })
    ls.sleep(tonumber(os.getenv("SLEEP_MS")))
    return ls.ack()
  end,
}
]]

describe("the hand-back after a pause past the consumer lease", function()
  after_each(helper.cleanup)

  it("gives back nothing the name's new holder runs: each entry runs once more at most #slow", function()
    local srv = helper.redis_start()
    assert(srv:call("XGROUP", "CREATE", "jobs", "workers", "$", "MKSTREAM"))
    local dir = helper.handlers_dir({ ["queue.lua"] = QUEUE })
    local a = helper.host_start({ "--consumer", "box" },
      { server = srv, dir = dir, env = { LANES = "1", SLEEP_MS = "3000" } })
    a:wait_log(READY, 20, { plain = true })
    srv:pipe(helper.payment_commands(1, 5, 5, "jobs"))
    a:wait_records({ msg = "job started" }, 1, 10, "box running job 1")
    helper.wait_until(function()
      local n = #assert(srv:call("XPENDING", "jobs", "workers", "-", "+", "100", "box"))
      return n == 5, n .. " pending for box"
    end, 10, "box to have read the 5")
    a:signal("STOP")
    -- the lease runs out while a is stopped; another process takes the name
    helper.wait_until(function()
      local keys = assert(srv:call("KEYS", "luastream:consumer:*"))
      return #keys == 0, #keys .. " lease keys"
    end, 30, "box's lease to expire")
    local b = helper.host_start({ "--consumer", "box" },
      { server = srv, dir = dir, env = { LANES = "5", SLEEP_MS = "4000" } })
    b:wait_records({ msg = "job started" }, 5, 20, "the new holder of box running its 5 pending entries")
    -- a wakes to a SIGTERM before it could learn it lost the name
    a:signal("TERM")
    a:signal("CONT")
    a:wait_exit(30)
    -- b runs its 5 (4 s each), then whatever the retry stream holds; give
    -- it time to run the copies, if any
    pcall(helper.wait_until, function() return b:count({ msg = "job started" }) >= 9 end, 15, "copies run")
    -- b ran the 5 once each; a had started only job 1. Entries 2..5 were
    -- never started by a, so nothing of a's may come back to run again.
    local runs = {}
    for _, r in ipairs(b:records({ msg = "job started" })) do runs[r.n] = (runs[r.n] or 0) + 1 end
    for id = 2, 5 do
      assert.equal(1, runs[tostring(id)], "job " .. id .. " runs on b " .. tostring(runs[tostring(id)]) .. " times")
    end
    assert.equal(0, a:count({ msg = "entries read but not started given back" }),
      "a gave back entries of a name it no longer held")
    assert.equal(0, tonumber(srv:call("XLEN", RETRY)), "copies on the retry stream")
    assert.equal(0, b:stop())
  end)
end)
