-- The heartbeat (host/consumer/heartbeat.c) and the hand-back at a stop
-- (host/consumer/handback.c) on the in-memory broker and the
-- virtual clock: a host keeps the entries it holds claimed however long
-- their handlers run, gives back at a stop those it never started, and at
-- the edges: an entry deleted while held, a consumer name lost to another
-- process.

local SPEC_DIR = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")
local apps = dofile(SPEC_DIR .. "/support/apps.lua")(SPEC_DIR .. "/fixtures")

-- Who started the entry, in order (the hosts of one broker share records).
local function started(app)
  local out = {}
  for _, r in ipairs(app:records("started")) do out[#out + 1] = r.consumer end
  return out
end

-- n orders on each of partitions 0 and 1 of orders (4 partitions, one key each).
local function publish_to_partitions_0_and_1(a, n)
  local crc16 = require "tests.integration.support.crc16"
  for _, p in ipairs({ 0, 1 }) do
    local sent = 0
    for i = 1, 1000 do
      local key = "acct-" .. i
      if sent < n and crc16(key) % 4 == p then
        sent = sent + 1
        a:publish("orders", { account = key, seq = p * 10 + sent }, { key = key, partitions = 4 })
      end
    end
  end
end

describe("the heartbeat", function()
  after_each(apps.stop_all)
  local app = apps.start -- a host on the handlers of fixtures/NAME

  it("keeps the entries whose handlers run ten times min_idle, and those waiting behind them, from another host's claiming read", function()
    local a = app("long_claiming", { version = "7.0.15", hostname = "a" })
    a:publish("jobs", { n = 1 })
    a:publish("jobs", { n = 2 })
    a:publish("jobs", { n = 3 }) -- two lanes: this one waits its turn in a
    local b = app("long_claiming", { with = a, hostname = "b" })
    for _ = 1, 50 do b:advance(100) end
    -- 5 s in: all a's, idle less than a heartbeat, delivered once
    local p = assert(a:command("XPENDING", "jobs", "workers", "-", "+", 10))
    assert.equal(3, #p)
    for _, e in ipairs(p) do
      assert.equal("a-long", e[2])
      assert.is_true(e[3] <= 400, e[1] .. " idle " .. tostring(e[3]) .. " ms")
      assert.equal(1, e[4])
    end
    for _ = 1, 170 do b:advance(100) end -- 22 s: two rounds of 10 s and then some
    assert.same({ "a-long", "a-long", "a-long" }, started(a), "each run once, on the host that read it")
    local done = a:received("long")
    assert.equal(3, #done)
    for _, d in ipairs(done) do assert.equal("ack", d.outcome) end
    assert.same({}, a:pending("jobs", "workers"))
  end)

  it("keeps a `new` subscription's entries given min_idle from another host's reclaim read however long they run", function()
    local a = app("long_new_reclaim", { version = "7.0.15", hostname = "a" })
    local b = app("long_new_reclaim", { with = a, hostname = "b" })
    a:publish("jobs", { n = 1 })
    a:publish("jobs", { n = 2 })
    a:publish("jobs", { n = 3 }) -- two lanes on a, two on b: someone waits
    for _ = 1, 50 do b:advance(100) end
    local p = assert(a:command("XPENDING", "jobs", "workers", "-", "+", 10))
    assert.equal(3, #p)
    for _, e in ipairs(p) do
      assert.is_true(e[3] <= 400, e[1] .. " idle " .. tostring(e[3]) .. " ms")
      assert.equal(1, e[4], e[1] .. " delivered again")
    end
    for _ = 1, 170 do b:advance(100) end
    local runs = {}
    for _, r in ipairs(a:records("started")) do
      assert.equal("new", r.read, "entry " .. r.n .. " reclaimed from " .. r.consumer)
      runs[r.n] = (runs[r.n] or 0) + 1
    end
    assert.same({ ["1"] = 1, ["2"] = 1, ["3"] = 1 }, runs)
    assert.same({}, a:pending("jobs", "workers"))
  end)

  it("gives back at a stop the entries read and never started, uncounted, and at the deadline those abandoned, counted: another host's claiming read takes them at once", function()
    local a = app("handback_claiming", { version = "7.0.15", hostname = "a" })
    for n = 1, 4 do a:publish("jobs", { n = n }) end -- all read by a
    local b = app("handback_claiming", { with = a, hostname = "b" })
    local function who()
      local out = {}
      for _, r in ipairs(a:records("started")) do out[#out + 1] = r.consumer .. ":" .. r.n end
      return out
    end
    assert.same({ "a-queue:1" }, who(), "one lane: 2, 3 and 4 wait in a")
    a:stop() -- 1 is abandoned at the deadline; 2, 3 and 4 were never started
    b:advance(1000) -- about one read of b, far less than min_idle (30 s)
    assert.same({ "a-queue:1", "b-queue:1" }, who(), "b took them at once, one lane: 1 runs")
    local p = assert(b:command("XPENDING", "jobs", "workers", "-", "+", 10))
    local owners = {}
    for _, e in ipairs(p) do owners[#owners + 1] = e[2] .. ":" .. e[4] end
    -- all b's: 1 delivered twice (abandoned while running, a's delivery
    -- counts), 2, 3 and 4 once in all (a's never-run delivery not counted)
    assert.same({ "b-queue:2", "b-queue:1", "b-queue:1", "b-queue:1" }, owners)
  end)

  it("leaves the outcome of an entry deleted from the stream while its handler runs to be written", function()
    -- A producer's MAXLEN or an operator's XDEL removes a running entry.
    -- Without a heartbeat its XACK still finds it pending and the reply and
    -- the publish are written (as with min_idle 30 s: no beat in these 4 s);
    -- the heartbeat's XCLAIM (Redis 7.0 and later, and the in-memory broker)
    -- would drop a deleted entry from the pending list, so the outcome would
    -- find it "no longer pending" and write nothing: the script leaves it.
    local a = app("heartbeat_deleted", { version = "7.0.15", hostname = "a" })
    local id = a:publish("jobs", { n = 1 })
    a:advance(100)
    assert.equal(1, #a:pending("jobs", "workers"), "read and running")
    assert.equal(1, a:command("XDEL", "jobs", id))
    for _ = 1, 40 do a:advance(100) end -- 4 s: the handler's 2.5 s, two heartbeats
    assert.equal(1, #a:received("long_reply"))
    assert.equal(1, a:xlen("jobs.audit"), "the handler's publish written")
    assert.equal(1, a:xlen("jobs.done"), "the handler's reply written")
  end)

  it("gives back nothing when the consumer name was lost to another process: the new holder runs them", function()
    -- consumers_spec's "runs none of the entries it holds when another
    -- process took the name meanwhile", on a claiming read, with a third
    -- host of another name reading the group.
    local first = app("handback_lease", { hostname = "box" })
    local second = app("handback_lease", { hostname = "box", with = first })
    local id = {}
    for i = 1, 3 do id[i] = first:publish("payments", { id = i }) end -- all read by first
    local other = app("handback_lease", { hostname = "other", with = first })
    first:stall("25s") -- it alone stops; the second takes the expired name meanwhile
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

  it("abandons at the shutdown deadline the handlers of a host already stopping because a consumer lease was lost", function()
    -- The lease lost stops the host (name_taken: host_stop, no deadline);
    -- a SIGTERM then (host_stop_within) must still bound the drain by
    -- --shutdown-timeout, as docs/operations.md says, rather than wait for
    -- handlers that may run for hours.
    local a = app("handback_partitions", { version = "7.0.15", hostname = "box" })
    publish_to_partitions_0_and_1(a, 2) -- one runs, one waits in each
    a:advance(100)
    assert.equal(2, #a:records("started"))
    a:command("SET", "luastream:consumer:{1}:orders:{1}:g:box-orders", "someone else")
    pcall(a.advance, a, "10s") -- renewal finds it lost: the host stops, its handlers run on
    assert.equal(1, #a:records("consumer lease lost to another process: stopped reading"))
    assert.equal(0, #a:records("host stopped"), "the two handlers run for 20 s")
    a:stop() -- the harness's stop: host_stop_within(0), as at a SIGTERM with --shutdown-timeout 0s
    assert.equal(1, #a:records("shutdown deadline reached"), "the deadline was never armed")
    local abandoned = a:records("shutdown deadline: handlers abandoned, entries stay pending")
    assert.equal(1, #abandoned)
    assert.equal("2", abandoned[1].unfinished)
  end)

  it("gives back nothing in any partition when one partition's consumer name was lost", function()
    local a = app("handback_partitions", { version = "7.0.15", hostname = "box" })
    publish_to_partitions_0_and_1(a, 3) -- one runs, two wait in each
    a:advance(100)
    -- another process took partition 1's name: its renewal finds it lost
    a:command("SET", "luastream:consumer:{1}:orders:{1}:g:box-orders", "someone else")
    pcall(a.advance, a, "10s")
    assert.equal(1, #a:records("consumer lease lost to another process: stopped reading"))
    assert.equal(0, #a:records("entries read but not started given back"))
    for _, p in ipairs({ 0, 1 }) do -- all still box-orders', none handed back (delivery count 1)
      for _, e in ipairs(assert(a:command("XPENDING", "orders:{" .. p .. "}", "g", "-", "+", 10))) do
        assert.equal("box-orders", e[2])
        assert.equal(1, e[4], "orders:{" .. p .. "} " .. e[1] .. " given back")
      end
    end
    pcall(a.advance, a, "30s") -- the running ones finish
  end)
end)
