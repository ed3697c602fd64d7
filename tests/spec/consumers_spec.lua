-- Consumer leases and idle-consumer removal on the in-memory broker and the
-- virtual clock (docs/consumer-groups-and-crash-recovery.md): a name held
-- by a live host is refused after one time to live; a crashed holder's
-- lease expires and is taken; renewal keeps a lease alive indefinitely; a
-- lease taken by another process stops the subscription; idle consumers
-- without pending entries or a lease are removed after 24 h. A host paused
-- past its lease hands no entry to a handler until Redis confirms the lease
-- again, and leaves them pending when another process took the name.
local testing = require "luastream.testing"

local HERE = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") .. "/fixtures"
local DIR = HERE .. "/consumers"
local SLOW = HERE .. "/consumers_slow" -- one lane, each entry takes 1 s
local ELSEWHERE = HERE .. "/consumers_elsewhere" -- reads another stream
local KEY = "luastream:consumer:{payments}:ledger:box-post"

local apps = {}
local function start(opts)
  opts = opts or {}
  opts.hostname = opts.hostname or "box"
  local dir = opts.dir or DIR
  opts.dir = nil
  local app = testing.app(dir, opts)
  apps[#apps + 1] = app
  return app
end

local function consumers(app)
  local out = {}
  for _, c in ipairs(assert(app:command("XINFO", "CONSUMERS", "payments", "ledger"))) do
    out[c[2]] = { pending = c[4], idle = c[6] }
  end
  return out
end

describe("consumer leases", function()
  after_each(function()
    for _, app in ipairs(apps) do pcall(app.stop, app) end
    apps = {}
  end)

  it("are held with a time to live of 20 s and renewed every 5 s while the host runs", function()
    local probe = start({ hostname = "probe" })
    local app = start({ with = probe })
    local value = assert(probe:command("GET", KEY))
    assert.matches(" box$", value)
    local ttl = probe:command("PTTL", KEY)
    assert.is_true(ttl > 19000 and ttl <= 20000, "ttl " .. ttl)
    app:advance("5s")
    ttl = probe:command("PTTL", KEY)
    assert.is_true(ttl > 19000, "renewed after 5 s: " .. ttl)
    app:advance("10m")
    assert.equal(value, probe:command("GET", KEY), "still this host's after 10 minutes")
    app:stop()
    assert.equal(0, probe:command("EXISTS", KEY), "given back on a clean stop")
  end)

  it("refuse a second host with the same name once the first has renewed past one ttl", function()
    local first = start()
    local second = start({ with = first })
    local waiting = second:records("consumer name held by another process: waiting for its lease to expire in case it crashed")
    assert.equal(1, #waiting)
    assert.matches("box pid %d+", waiting[1].holder)
    first:publish("payments", { id = 1 })
    assert.equal(1, #first:records("handled"), "handled once, by the first")
    -- the second host is refused and stops (its advance may raise as it does)
    pcall(second.advance, second, "22s")
    local refused = first:records("consumer name in use by a live process")
    assert.equal(1, #refused)
    assert.equal("payments", refused[1].stream)
    assert.equal("ledger", refused[1].group)
    assert.equal("box-post", refused[1].consumer)
    assert.matches("--instance N", refused[1].hint, 1, true)
    first:publish("payments", { id = 2 })
    assert.equal(2, #first:records("handled"), "the first runs on, alone")
  end)

  it("let a successor take a crashed holder's name once its lease expires", function()
    local probe = start({ hostname = "probe" })
    local first = start({ with = probe })
    local holder = probe:command("GET", KEY)
    first:stop()
    -- a crash: the lease stays as it was, and nobody renews it
    probe:command("SET", KEY, holder, "PX", "20000")
    local second = start({ with = probe })
    assert.equal(1, #probe:records("consumer name held by another process: waiting for its lease to expire in case it crashed"))
    second:advance("19s")
    assert.equal(0, #probe:records("consumer name in use by a live process"))
    second:advance("2s")
    local now = probe:command("GET", KEY)
    assert.is_not_nil(now)
    assert.not_equal(holder, now, "taken by the successor")
    assert.equal(0, #probe:records("consumer name in use by a live process"))
    probe:stop() -- its own consumer reads the group too: only the successor's now
    second:publish("payments", { id = 2 })
    local handled = probe:records("handled")
    assert.equal(1, #handled)
    assert.equal("box-post", handled[#handled].consumer)
  end)

  it("stop the subscription when another process takes the name while it runs", function()
    -- the probe reads another stream: the app is the only reader of the group
    local probe = start({ hostname = "probe", dir = ELSEWHERE })
    local app = start({ with = probe })
    probe:command("SET", KEY, "intruder 1 other/1 elsewhere", "PX", "60000")
    pcall(app.advance, app, "6s")
    local lost = probe:records("consumer lease lost to another process: stopped reading")
    assert.equal(1, #lost)
    assert.equal("elsewhere pid 1", lost[1].holder)
    probe:publish("payments", { id = 3 })
    assert.same({}, probe:records("handled"), "handled after the lease was lost")
    assert.same({}, probe:pending("payments", "ledger"), "read after the lease was lost")
    assert.equal("intruder 1 other/1 elsewhere", probe:command("GET", KEY), "the other's lease untouched")
  end)

  it("--instance numbers the names so hosts run side by side", function()
    local one = start({ instance = 1 })
    local two = start({ instance = 2, with = one })
    one:publish("payments", { id = 1 })
    one:publish("payments", { id = 2 })
    two:settle()
    local c = consumers(one)
    assert.is_not_nil(c["box-post-1"])
    assert.is_not_nil(c["box-post-2"])
    assert.equal(2, #one:records("handled"))
    assert.equal(0, #two:records("consumer name in use by a live process"))
  end)
end)

local RETAKEN = "consumer lease had expired (paused or Redis unreachable); taken again"

local function ids(deliveries)
  local out = {}
  for i, d in ipairs(deliveries) do out[i] = d.id end
  return out
end

describe("a host paused longer than its lease", function()
  after_each(function()
    for _, app in ipairs(apps) do pcall(app.stop, app) end
    apps = {}
  end)

  it("hands no entry to a handler before a renewal has confirmed the lease", function()
    local app = start({ dir = SLOW })
    local id = {}
    for i = 1, 3 do id[i] = app:publish("payments", { id = i }) end
    assert.equal(1, #app:records("handled"), "one runs, two wait in the lane")
    local seen = #app:logs()
    app:pause("25s") -- past the lease's time to live: the key expires meanwhile
    app:settle()     -- the first handler's sleep ends late, and the renewal is overdue
    local order = {}
    local logs = app:logs()
    for i = seen + 1, #logs do
      local msg = testing.logfmt(logs[i]).msg
      if msg == "handled" or msg == RETAKEN then order[#order + 1] = msg end
    end
    assert.same({ RETAKEN, "handled" }, order, "the waiting entry runs only once Redis has answered the renewal")
    app:advance("3s")
    assert.same(id, ids(app:received("post")), "each once, in order")
    assert.equal(0, #app:pending("payments", "ledger"))
  end)

  it("holds the next entry after a stall within the time to live but past the watchdog's margin", function()
    -- 9 s without the loop turning: the key (20 s) has not expired, but a
    -- handler started now could hold the loop for the watchdog's 10 s and
    -- end after it: the entry waits for a renewal first.
    local app = start({ dir = SLOW })
    local id = {}
    for i = 1, 2 do id[i] = app:publish("payments", { id = i }) end
    local seen = #app:logs()
    app:pause("9s")
    app:settle()
    local order = {}
    local logs = app:logs()
    for i = seen + 1, #logs do
      local msg = testing.logfmt(logs[i]).msg
      if msg == "handled" or msg == "consumer lease renewed: entries run again" then order[#order + 1] = msg end
    end
    assert.same({ "consumer lease renewed: entries run again", "handled" }, order)
    app:advance("3s")
    assert.same(id, ids(app:received("post")))
  end)

  it("runs none of the entries it holds when another process took the name meanwhile", function()
    local first = start({ dir = SLOW })
    -- a second process under the same name waits in case the first crashed
    local second = start({ dir = SLOW, with = first })
    local id = {}
    for i = 1, 3 do id[i] = first:publish("payments", { id = i }) end
    -- the first process alone stops (SIGSTOP) while the second polls: it
    -- takes the expired lease before the first's handler returns and its
    -- lane moves on
    first:stall("25s")
    second:advance("5s")
    assert.equal(1, #second:records("consumer lease lost to another process: stopped reading"))
    assert.same({ id[1] }, ids(first:received("post")), "nothing more on the old holder")
    -- the new holder runs them once each, the one the stalled holder was
    -- running too: it was still pending under the name
    assert.same({ id[1], id[2], id[3] }, ids(second:received("post")))
    assert.equal(0, #second:pending("payments", "ledger"))
  end)
end)

describe("idle consumers", function()
  after_each(function()
    for _, app in ipairs(apps) do pcall(app.stop, app) end
    apps = {}
  end)

  it("are removed after 24 h idle with nothing pending and no lease; the others stay", function()
    local app = start()
    app:publish("payments", { id = 1 })
    app:command("XGROUP", "CREATECONSUMER", "payments", "ledger", "old-host-post")
    -- an entry pending under a consumer whose host crashed long ago
    app:command("XGROUP", "SETID", "payments", "ledger", "0")
    app:command("XREADGROUP", "GROUP", "ledger", "crashed-host-post", "COUNT", "1", "STREAMS", "payments", ">")
    app:advance("23h")
    assert.is_not_nil(consumers(app)["old-host-post"], "not yet: idle 23 h")
    app:advance("1h")
    local c = consumers(app)
    assert.is_nil(c["old-host-post"], "idle 24 h, nothing pending: removed")
    assert.is_not_nil(c["crashed-host-post"], "kept: it has a pending entry")
    assert.is_not_nil(c["box-post"], "kept: this host's own (leased)")
    local removed = app:records("idle consumer removed from the group")
    assert.equal(1, #removed)
    assert.equal("old-host-post", removed[1].removed)
  end)

  it("are removed from the retry stream too, by the same rules", function()
    local RETRY = "payments:retry:ledger"
    local app = start()
    local function on_retry()
      local out = {}
      for _, c in ipairs(assert(app:command("XINFO", "CONSUMERS", RETRY, "ledger"))) do
        out[c[2]] = { pending = c[4], idle = c[6] }
      end
      return out
    end
    -- idle and with nothing pending, on the retry stream only
    app:command("XGROUP", "CREATECONSUMER", RETRY, "ledger", "gone-host-post")
    -- a crashed host's entry pending on the retry stream
    app:command("XADD", RETRY, "*", "data", '{"id":1}')
    app:command("XGROUP", "SETID", RETRY, "ledger", "0")
    app:command("XREADGROUP", "GROUP", "ledger", "crashed-host-post", "COUNT", "1", "STREAMS", RETRY, ">")
    -- pending on the stream, nothing pending on the retry stream: it keeps
    -- its entry on the stream and goes from the retry stream only
    app:publish("payments", { id = 2 })
    app:command("XGROUP", "SETID", "payments", "ledger", "0")
    app:command("XREADGROUP", "GROUP", "ledger", "half-host-post", "COUNT", "1", "STREAMS", "payments", ">")
    app:command("XGROUP", "CREATECONSUMER", RETRY, "ledger", "half-host-post")
    app:advance("23h")
    assert.is_not_nil(on_retry()["gone-host-post"], "not yet: idle 23 h")
    app:advance("1h")
    local r, s = on_retry(), consumers(app)
    assert.is_nil(r["gone-host-post"], "idle 24 h, nothing pending on the retry stream: removed")
    assert.is_not_nil(r["crashed-host-post"], "kept: it has a pending entry there")
    assert.equal(1, r["crashed-host-post"].pending)
    assert.is_nil(r["half-host-post"], "nothing pending on the retry stream: removed there")
    assert.is_not_nil(s["half-host-post"], "kept on the stream, where its entry is pending")
    assert.equal(1, s["half-host-post"].pending)
    assert.is_not_nil(r["box-post"], "kept: this host's own (leased)")
    assert.equal(1, #app:pending(RETRY, "ledger"), "the crashed host's entry still there")
    local removed = app:records("idle consumer removed from the group")
    assert.equal(2, #removed)
    for _, rec in ipairs(removed) do
      assert.equal(RETRY, rec.retry_stream)
      assert.equal("ledger", rec.group)
    end
    local names = { removed[1].removed, removed[2].removed }
    table.sort(names)
    assert.same({ "gone-host-post", "half-host-post" }, names)
  end)
end)
