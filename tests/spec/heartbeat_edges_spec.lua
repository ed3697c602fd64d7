-- The heartbeat and the hand-back (host/consumer/heartbeat.c,
-- host/consumer/subscription.c part_stop) at their edges, on the in-memory
-- broker and the virtual clock: an entry deleted while held, a consumer name
-- lost to another process.
local testing = require "luastream.testing"

local HERE = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") .. "/fixtures"

describe("the heartbeat", function()
  local apps = {}
  after_each(function()
    for _, app in ipairs(apps) do pcall(app.stop, app) end
    apps = {}
  end)

  it("leaves the outcome of an entry deleted from the stream while its handler runs to be written", function()
    -- A producer's MAXLEN or an operator's XDEL removes a running entry.
    -- Without a heartbeat its XACK still finds it pending and the reply and
    -- the publish are written (as with min_idle 30 s: no beat in these 4 s);
    -- the heartbeat's XCLAIM (Redis 7.0 and later, and the in-memory broker)
    -- would drop a deleted entry from the pending list, so the outcome would
    -- find it "no longer pending" and write nothing: the script leaves it.
    local a = testing.app(HERE .. "/heartbeat_deleted", { version = "7.0.15", hostname = "a" })
    apps[#apps + 1] = a
    local id = a:publish("jobs", { n = 1 })
    a:advance(100)
    assert.equal(1, #a:pending("jobs", "workers"), "read and running")
    assert.equal(1, a:command("XDEL", "jobs", id))
    for _ = 1, 40 do a:advance(100) end -- 4 s: the handler's 2.5 s, two heartbeats
    assert.equal(1, #a:received("long_reply"))
    assert.equal(1, a:xlen("jobs.audit"), "the handler's publish written")
    assert.equal(1, a:xlen("jobs.done"), "the handler's reply written")
  end)
end)

describe("the hand-back", function()
  local apps = {}
  after_each(function()
    for _, app in ipairs(apps) do pcall(app.stop, app) end
    apps = {}
  end)

  local function start(opts)
    local app = testing.app(HERE .. "/handback_lease", opts)
    apps[#apps + 1] = app
    return app
  end

  it("gives back nothing when the consumer name was lost to another process: the new holder runs them", function()
    -- consumers_spec's "runs none of the entries it holds when another
    -- process took the name meanwhile", on a claiming read, with a third
    -- host of another name reading the group.
    local first = start({ hostname = "box" })
    local second = start({ hostname = "box", with = first })
    local id = {}
    for i = 1, 3 do id[i] = first:publish("payments", { id = i }) end -- all read by first
    local other = start({ hostname = "other", with = first })
    first:pause("25s")
    first:settle()
    second:advance("5s")
    assert.equal(1, #second:records("consumer lease lost to another process: stopped reading"))
    other:advance("3s")
    -- The old holder's queued entries are the new holder's now (it may be
    -- running them already): given back, idle since the epoch, they would go
    -- to the third host as well.
    local who = {}
    for _, r in ipairs(second:records("handled")) do
      who[r.entry_id] = (who[r.entry_id] and who[r.entry_id] .. "," or "") .. r.consumer
    end
    for i = 2, 3 do -- the new holder takes them after min_idle; the third host never
      assert.is_not.equal("other-post", who[id[i]], id[i] .. " run by the third host")
    end
    assert.equal(0, #second:records("entries read but not started given back"))
  end)
end)
