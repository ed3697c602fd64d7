-- The hand-back of a stopping `new` subscription (host/consumer/handback.c)
-- on the in-memory broker and the virtual clock: nothing claims on a `new`
-- group, so the entries a host read and will not finish go back through the
-- group's retry stream, copied and acked in one script, and the next host's
-- read runs each once, with the delivery count it would have seen.
local testing = require "luastream.testing"

local SPEC_DIR = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")
local apps = dofile(SPEC_DIR .. "/support/apps.lua")(SPEC_DIR .. "/fixtures")
local RETRY = "jobs:retry:workers"

-- "consumer:n:deliveries" of each start, in order (one broker's hosts share records).
local function starts(app)
  local out = {}
  for _, r in ipairs(app:records("started")) do
    out[#out + 1] = r.consumer .. ":" .. r.n .. ":" .. r.deliveries
  end
  return out
end

describe("the hand-back of a `new` subscription", function()
  after_each(apps.stop_all)
  local function app(opts) return apps.start("handback_new", opts) end

  it("gives back through the retry stream what a stopping host read: each run once elsewhere, the delivery counts unchanged", function()
    local a = app({ hostname = "a" })
    for n = 1, 4 do a:publish("jobs", { n = n }) end
    -- a copy a retry left earlier: its count travels with it
    a:command("XADD", RETRY, "*", "data", '{"n":5}', "delivery-count", "2", "original-id", "1-1")
    a:settle()
    assert.same({ "a-queue:1:0" }, starts(a), "one lane: 2 to 5 wait in a")
    assert.equal(4, #a:pending("jobs", "workers"))
    assert.equal(1, #a:pending(RETRY, "workers"))

    local b = app({ with = a, hostname = "b" }) -- reads behind a: nothing new for it yet
    b:settle()
    assert.same({ "a-queue:1:0" }, starts(a))

    -- 2 to 5 were never started: given back uncounted; 1 is abandoned at the
    -- deadline (of now): it ran, so its delivery counts
    a:stop()
    assert.equal(1, #b:records("entries read but not started given back"))
    assert.equal(1, #b:records("shutdown deadline: handlers abandoned, entries given back"))
    b:advance(1000)
    local ran = starts(b)
    table.sort(ran)
    assert.same({ "a-queue:1:0", "b-queue:1:1", "b-queue:2:0", "b-queue:3:0", "b-queue:4:0", "b-queue:5:2" }, ran,
      "each once on b, with the count the unfinished run would have left")
    local copies = {}
    for _, d in ipairs(b:received("queue")) do
      copies[d.message.n] = d.fields["original-id"] ~= nil
    end
    assert.same({ true, true, true, true, true }, copies, "all five read from the retry stream")
    for _, d in ipairs(b:received("queue")) do assert.equal("ack", d.outcome) end
    assert.same({}, b:pending("jobs", "workers"))
    assert.same({}, b:pending(RETRY, "workers"))
  end)

  it("leaves an entry deleted from the stream, or claimed by another consumer meanwhile, where it is", function()
    local a = app({ hostname = "a" })
    local id = {}
    for n = 1, 3 do id[n] = a:publish("jobs", { n = n }) end
    a:settle()
    assert.equal(3, #a:pending("jobs", "workers"))
    assert.equal(1, a:command("XDEL", "jobs", id[2]))
    a:command("XCLAIM", "jobs", "workers", "someone-else", 0, id[3])
    local b = app({ with = a, hostname = "b" })
    a:stop()
    b:advance(1000)
    -- 1 (abandoned) is given back; 2 is gone; 3 is someone else's now
    assert.same({ "a-queue:1:0", "b-queue:1:1" }, starts(b))
    local left = {}
    for _, e in ipairs(b:pending("jobs", "workers")) do left[#left + 1] = e.id .. ":" .. e.consumer end
    table.sort(left)
    assert.same({ id[2] .. ":a-queue", id[3] .. ":someone-else" }, left)
  end)
  it("gives back what a subscription stopped by a reload read and never started: another host runs each once, uncounted", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p '" .. dir .. "'"))
    local src = assert(io.open(SPEC_DIR .. "/fixtures/handback_new/queue.lua")):read("*a")
    local function write()
      local f = assert(io.open(dir .. "/queue.lua", "w"))
      f:write(src)
      f:close()
    end
    write()
    local a = apps.keep(testing.app(dir, { hostname = "a" }))
    for n = 1, 3 do a:publish("jobs", { n = n }) end
    assert.same({ "a-queue:1:0" }, starts(a), "one lane: 2 and 3 wait")
    os.remove(dir .. "/queue.lua")
    a:reload() -- stops the subscription: 2 and 3 given back; 1 runs on (a's sleep is long)
    assert.equal(1, #a:records("entries read but not started given back"))
    local copies = {}
    for _, e in ipairs(a:entries(RETRY)) do copies[e.message.n] = e.fields["delivery-count"] end
    assert.same({ [2] = "0", [3] = "0" }, copies)
    local p = a:pending("jobs", "workers")
    assert.equal(1, #p, "only 1, still running, pending on the stream")
    local b = app({ with = a, hostname = "b" })
    b:advance(1000)
    assert.same({ "a-queue:1:0", "b-queue:2:0", "b-queue:3:0" }, starts(b))
    assert.same({}, b:pending(RETRY, "workers"))
    os.remove(dir)
  end)
end)
