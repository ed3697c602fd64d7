-- handle_batch (docs/handlers.md, "Batch handlers") on the in-memory broker
-- and the virtual clock: calls gather entries up to batch_max, wait at most
-- batch_wait to fill, apply each entry's outcome in order with its own
-- writes, fail every entry of a call that raises, keep a key's entries in
-- stream order, and hand back what has not started on a stop.
local testing = require "luastream.testing"
local json = require "luastream.json"
local ls = require "luastream"

local HERE = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") .. "/fixtures"

local apps = {}
local function start(dir, opts)
  local app = testing.app(HERE .. "/" .. dir, opts)
  apps[#apps + 1] = app
  return app
end

-- Adds every message to stream in one server-side step (nothing reads in
-- between, unlike app:publish, which settles after each), then settles.
local ADD = [[
for i = 2, #ARGV, 2 do
  if ARGV[i] == "" then redis.call("XADD", KEYS[1], "*", "data", ARGV[i - 1])
  else redis.call("XADD", KEYS[1], "*", "data", ARGV[i - 1], "partition-key", ARGV[i]) end
end
return #ARGV / 2]]
local function add_all(app, stream, msgs)
  local args = {}
  for _, m in ipairs(msgs) do
    args[#args + 1] = type(m) == "string" and m or assert(json.encode(m))
    args[#args + 1] = type(m) == "table" and m.key or ""
  end
  assert(app:command("EVAL", ADD, 1, stream, unpack(args)))
  app:settle()
end

local function calls(app) return app:command("LRANGE", "calls", 0, -1) end

local function outcomes(app, handler)
  local out = {}
  for _, d in ipairs(app:received(handler)) do out[#out + 1] = d.message and d.message.id .. "=" .. d.outcome or d.outcome end
  return out
end

describe("handle_batch", function()
  after_each(function()
    for _, app in ipairs(apps) do pcall(app.stop, app) end
    apps = {}
  end)

  it("takes what a read brings in calls of at most batch_max, in stream order", function()
    local app = start("batch")
    local msgs = {}
    for i = 1, 10 do msgs[i] = { id = "p" .. i, account = "acme" } end
    add_all(app, "payments", msgs)
    assert.same({ "p1,p2,p3,p4", "p5,p6,p7,p8", "p9,p10" }, calls(app))
    assert.equal(10, #app:received("batch_ledger"))
    assert.equal(10, app:command("LLEN", "posted:acme"))
    assert.equal(0, #app:pending("payments", "ledger"))
  end)

  it("applies each entry's own outcome, in order, with its own writes", function()
    local app = start("batch")
    add_all(app, "payments", {
      { id = "a", account = "x" },
      { id = "b", account = "x", outcome = "retry" },
      { id = "c", account = "x", outcome = "reply" },
      { id = "d", account = "x", outcome = "reject" },
    })
    local got = outcomes(app, "batch_ledger")
    assert.same({ "a=ack", "b=retry", "c=reply", "d=reject" }, { got[1], got[2], got[3], got[4] })
    -- the writes of the entries that acked (a) or replied (c) only
    assert.same({ "a", "c" }, app:command("LRANGE", "posted:x", 0, -1))
    local replies = app:entries("payments.posted")
    assert.equal(1, #replies)
    assert.same({ id = "c", posted = true }, replies[1].message)
    -- b's retry copies come back at once, each a call of its own, until
    -- max_deliveries (3) dead-letters it beside the rejected d
    assert.same({ "b=retry", "b=retry" }, { got[5], got[6] })
    local dead = {}
    for _, e in ipairs(app:entries("payments.dead")) do dead[#dead + 1] = e.message.id end
    assert.same({ "d", "b" }, dead)
    assert.same({ "a", "c" }, app:command("LRANGE", "posted:x", 0, -1))
  end)

  it("delays an entry that returns retry_after, and dead-letters it at max_deliveries", function()
    local app = start("batch", { handler_errors = "record" })
    add_all(app, "payments", { { id = "a", account = "x" }, { id = "r", account = "x", outcome = "retry_after" } })
    assert.same({ "a=ack", "r=retry_after" }, outcomes(app, "batch_ledger"))
    app:advance("4s")
    assert.equal(2, #app:received("batch_ledger"), "not before its 5 s")
    app:advance("2s")
    assert.equal(3, #app:received("batch_ledger"))
    app:advance("6s")
    assert.equal(4, #app:received("batch_ledger"))
    local dead = app:entries("payments.dead")
    assert.equal(1, #dead, "the third delivery was the last: max_deliveries = 3")
    assert.equal("r", dead[1].message.id)
  end)

  it("fails every entry of a call that raises, with the same error, and writes nothing", function()
    local app = start("batch", { handler_errors = "record" })
    add_all(app, "payments", {
      { id = "a", account = "x" }, { id = "b", account = "x", outcome = "raise" }, { id = "c", account = "x" },
    })
    local got = app:received("batch_ledger")
    assert.equal(3, #got)
    for _, d in ipairs(got) do
      assert.equal("error", d.outcome)
      assert.matches("ledger closed", d.error)
      assert.equal(got[1].error, d.error)
    end
    assert.equal(0, app:command("LLEN", "posted:x"))
    assert.equal(3, #app:pending("payments", "ledger"), "left pending, as a handle's error")
  end)

  it("fails every entry of a call whose return is malformed", function()
    local app = start("batch", { handler_errors = "record" })
    add_all(app, "payments", { { id = "a", account = "x" }, { id = "b", account = "x", outcome = "bad" } })
    local got = app:received("batch_ledger")
    assert.equal(2, #got)
    for _, d in ipairs(got) do
      assert.equal("error", d.outcome)
      assert.equal("bad-return", d.reason)
      assert.matches("1 outcomes for 2 entries", d.error)
    end
    assert.equal(0, app:command("LLEN", "posted:x"))
  end)

  it("never hands a body that does not decode to the call", function()
    local app = start("batch")
    add_all(app, "payments", { { id = "a", account = "x" }, "{not json", { id = "c", account = "x" } })
    assert.same({ "a,c" }, calls(app))
    local got = app:received("batch_ledger")
    assert.equal(3, #got)
    assert.equal("invalid", got[2].outcome)
    assert.equal(1, #app:entries("payments.dead"))
    assert.same({ "a", "c" }, app:command("LRANGE", "posted:x", 0, -1))
  end)

  it("applies outcomes in the order it handed the entries, each with its own writes, whatever the call did to the list", function()
    local app = start("batch_sorted")
    add_all(app, "sorted", { { n = 1 }, { n = 2 }, { n = 3 } })
    local got = {}
    for _, d in ipairs(app:received("batch_sorter")) do got[#got + 1] = d.message.n .. "=" .. d.outcome end
    assert.same({ "1=retry", "2=ack", "3=ack", "1=ack" }, got)
    assert.same({ "2", "3", "1" }, app:command("LRANGE", "posted", 0, -1), "each entry's write once, with its own ack")
    assert.same({}, app:pending("sorted", "sorter"))
  end)

  it("waits at most batch_wait to fill a call, on the virtual clock", function()
    local app = start("batch_wait")
    app:publish("events", { n = 1 })
    assert.same({}, calls(app))
    app:advance("1s")
    app:publish("events", { n = 2 })
    assert.same({}, calls(app), "not full, and batch_wait not over")
    app:advance("999ms")
    assert.same({}, calls(app))
    app:advance("1ms")
    assert.same({ "1,2" }, calls(app), "2 s after its first entry")
    for n = 3, 5 do app:publish("events", { n = n }) end
    assert.same({ "1,2", "3,4,5" }, calls(app), "full: it goes at once")
    assert.equal(0, #app:pending("events", "collector"))
  end)

  it("takes a default outcome with exceptions by index", function()
    local app = start("batch_wait")
    add_all(app, "events", { { n = 1 }, { n = 2, retry = true }, { n = 3 } })
    local got = app:received("batch_collect")
    assert.same({ "ack", "retry_after", "ack" }, { got[1].outcome, got[2].outcome, got[3].outcome })
    app:advance("1m")
    app:advance("2s") -- the copy waits batch_wait alone
    got = app:received("batch_collect")
    assert.equal(4, #got)
    assert.equal(2, got[4].message.n)
  end)

  it("with by_key, keeps each key's entries in stream order, applying their writes in that order", function()
    local app = start("batch_by_key")
    local msgs = {}
    for n = 1, 6 do
      msgs[#msgs + 1] = { key = "a", n = n }
      msgs[#msgs + 1] = { key = "b", n = n }
    end
    add_all(app, "moves", msgs)
    assert.same({ "1", "2", "3", "4", "5", "6" }, app:command("LRANGE", "order:a", 0, -1))
    assert.same({ "1", "2", "3", "4", "5", "6" }, app:command("LRANGE", "order:b", 0, -1))
    assert.equal(0, #app:pending("moves", "mover"))
    local got = calls(app)
    assert.same({ "a:1,a:2,a:3,a:4,a:5", "b:1,b:2,b:3,b:4,b:5", "a:6", "b:6" }, got,
      "a key's waiting entries join its call, up to batch_max; the 6th waits for its key's call")
    local seen = { a = 0, b = 0 }
    for _, call in ipairs(calls(app)) do
      assert.is_true(#call > 0)
      for key, n in call:gmatch("(%a):(%d+)") do
        n = tonumber(n)
        assert.equal(seen[key] + 1, n, "key " .. key .. " in stream order across calls")
        seen[key] = n
      end
    end
  end)

  it("writes each entry's ctx:write once, also when its call is redelivered", function()
    local app = start("batch", { handler_errors = "record" })
    add_all(app, "payments", { { id = "a", account = "x" }, { id = "b", account = "x", outcome = "retry" } })
    app:advance("1s")
    app:advance("1s")
    assert.same({ "a" }, app:command("LRANGE", "posted:x", 0, -1))
  end)

  it("hands back a forming call's entries on a stop, uncounted", function()
    local a = start("batch_wait", { hostname = "a" })
    a:publish("events", { n = 1 })
    a:publish("events", { n = 2 })
    local b = start("batch_wait", { hostname = "b", with = a }) -- reads behind a: nothing for it yet
    b:settle()
    assert.same({}, calls(a), "waiting for batch_wait")
    a:stop()
    assert.equal(1, #b:records("entries read but not started given back"))
    b:advance("2s")
    assert.same({ "1,2" }, calls(b), "run once, on b")
    assert.equal(2, #b:received("batch_collect"))
    for _, d in ipairs(b:received("batch_collect")) do
      assert.equal("0", d.headers[ls.DELIVERY_COUNT_HEADER] or "0", "not counted")
    end
  end)

  it("runs no forming call on a host that stalled while another process took its name", function()
    local first = start("batch_wait", { hostname = "box" })
    local second = start("batch_wait", { hostname = "box", with = first }) -- the same consumer name: it waits
    first:publish("events", { n = 1 })
    first:publish("events", { n = 2 })
    assert.same({}, calls(first), "waiting for batch_wait")
    -- the first alone stops past its lease: its batch_wait fires late, and
    -- the second has taken the name meanwhile
    first:stall("25s")
    second:advance("5s")
    assert.equal(1, #second:records("consumer lease lost to another process: stopped reading"))
    assert.equal(0, #first:received("batch_collect"), "nothing ran on the old holder")
    second:advance("2s")
    assert.same({ "1,2" }, calls(second), "once, on the new holder")
    assert.equal(2, #second:received("batch_collect"))
    assert.equal(0, #second:pending("events", "collector"))
  end)

  it("gives a forming call's entries back at a pause, and runs them once resumed, uncounted", function()
    local app = start("batch_wait_long", { hostname = "a" }) -- batch_wait 10 s
    app:publish("events", { n = 1 })
    app:publish("events", { n = 2 })
    app:advance("1s")
    app:pause_group("events", "collector")
    app:advance("5s") -- the pause is seen within 5 s, at the latest
    assert.same({}, calls(app), "the call never went")
    assert.same({}, app:pending("events", "collector"), "what waited went back")
    assert.equal(1, app:resume_group("events", "collector"))
    app:advance("20s")
    assert.same({ "1,2" }, calls(app))
    assert.equal(2, #app:received("batch_collect_long"))
    for _, d in ipairs(app:received("batch_collect_long")) do
      assert.equal("0", d.headers[ls.DELIVERY_COUNT_HEADER] or "0", "not counted")
    end
    assert.same({}, app:pending("events", "collector"))
  end)

  it("keeps each entry of a running call claimed, and applies max_run to each", function()
    local app = start("batch_max_run", { hostname = "a" })
    add_all(app, "jobs", { { n = 1 }, { n = 2 }, { n = 3 } })
    app:advance("2900ms")
    for _, p in ipairs(app:pending("jobs", "workers")) do
      assert.is_true(p.idle < 1000, "kept claimed: idle " .. p.idle)
    end
    local labels = { handler = "batch_slow" }
    assert.equal(0, app:metric("luastream_handler_overran_total", labels), "within max_run (3 s)")
    app:advance("2s")
    assert.equal(3, app:metric("luastream_handler_overran_total", labels), "each entry of the call")
    app:advance("6s")
    assert.equal(3, #app:received("batch_slow"))
    assert.same({}, app:pending("jobs", "workers"))
  end)

  it("under max_in_flight, takes an entry into a call only with its slot, and never more than batch_max", function()
    local app = start("batch_inflight", { hostname = "a" })
    local msgs = {}
    for n = 1, 12 do msgs[n] = { n = n } end
    add_all(app, "jobs", msgs)
    for _ = 1, 20 do app:advance("500ms") end
    local seen, most = 0, 0
    for _, call in ipairs(calls(app)) do
      local k = select(2, call:gsub("%d+", ""))
      seen, most = seen + k, math.max(most, k)
    end
    assert.equal(12, seen)
    assert.is_true(most <= 3, "a call of " .. most)
    assert.equal(12, #app:received("batch_capped"))
    assert.same({}, app:pending("jobs", "workers"))
  end)

  it("takes a partition's entries into calls of their own, with the partition's ctx", function()
    local app = start("batch_partitioned")
    local want = {}
    for n = 1, 6 do
      local _, p = app:publish("orders", { n = n }, { key = "k" .. n, partitions = 2 })
      want[p] = (want[p] and want[p] .. "," or "") .. n
    end
    local got = {}
    for _, call in ipairs(calls(app)) do
      local stream, ns = call:match("^(.-)=(.*)$")
      local p = tonumber(stream:match("^orders:{(%d)}$"))
      got[p] = (got[p] and got[p] .. "," or "") .. ns
    end
    assert.same(want, got)
  end)

  it("gives every entry of a call that returns ls.pause back uncounted, and pauses the group", function()
    local app = start("batch_pause", { hostname = "a" })
    add_all(app, "jobs", { { n = 1 }, { n = 2 }, { n = 3 } })
    assert.same({ "1:0,2:0,3:0" }, calls(app))
    app:advance("4s")
    assert.same({ "1:0,2:0,3:0" }, calls(app), "paused")
    app:advance("30s")
    local got = calls(app)
    local again = {}
    for k = 2, #got do for n, d in got[k]:gmatch("(%d+):(%d+)") do again[#again + 1] = n .. ":" .. d end end
    table.sort(again)
    assert.same({ "1:0", "2:0", "3:0" }, again, "each once more, uncounted")
    assert.same({}, app:pending("jobs", "workers"))
  end)

  it("leaves a running call's entries to a reload, which starts the next with the new file", function()
    local app = start("batch", { handler_errors = "record" })
    add_all(app, "payments", { { id = "s", account = "x", stall = 3000 }, { id = "t", account = "x" } })
    assert.same({}, calls(app))
    app:reload(true)
    app:advance("3s")
    assert.same({ "s,t" }, calls(app))
    assert.same({ "s", "t" }, app:command("LRANGE", "posted:x", 0, -1))
    assert.equal(0, #app:pending("payments", "ledger"))
  end)
end)

describe("handle_batch with a schema and a reply_schema", function()
  local app
  before_each(function() app = testing.app(HERE .. "/batch_schema", { handler_errors = "record" }) end)
  after_each(function() app:stop() end)

  it("fails only the entry whose outcome is malformed, applying the others' with their writes", function()
    add_all(app, "payments", {
      { id = 1, amount_cents = 1 }, { id = 2, amount_cents = 1, bad_reply = true },
      { id = 3, amount_cents = 1, bad_return = true }, { id = 4, amount_cents = 1 },
    })
    assert.same({ "1,2,3,4" }, calls(app))
    local got = app:received("batch_checked")
    assert.equal(4, #got)
    assert.same({ "reply", "error", "error", "reply" }, { got[1].outcome, got[2].outcome, got[3].outcome, got[4].outcome })
    assert.equal("bad-return", got[2].reason)
    assert.equal('ls.reply: the reply does not match reply_schema: $.status: must be one of "ok", "held"', got[2].error)
    assert.equal("bad-return", got[3].reason)
    assert.matches("handle returned number 42", got[3].error, 1, true)
    local replies = {}
    for _, e in ipairs(app:entries("payments.checked")) do replies[#replies + 1] = e.message.id end
    assert.same({ 1, 4 }, replies)
    assert.same({ "1", "4" }, app:command("LRANGE", "posted", 0, -1), "the failed entries' writes not applied")
    local pending = app:pending("payments", "checked")
    assert.same({ got[2].id, got[3].id }, { pending[1].id, pending[2].id }, "left pending, as a handle's error")
    assert.equal(2, #pending)
  end)

  it("never hands an entry its schema refuses to the call, on either path, and dead-letters it alone", function()
    assert(app:command("EVAL", [[
redis.call("XADD", KEYS[1], "*", "data", '{"id":1,"amount_cents":1}')
redis.call("XADD", KEYS[1], "*", "data", '{"id":2,"amount_cents":-1}')
redis.call("XADD", KEYS[1], "*", "id", "3", "amount_cents", "100")
redis.call("XADD", KEYS[1], "*", "data", '{"id":4,"amount_cents":1}')
return 4]], 1, "payments"))
    app:settle()
    assert.same({ "1,4" }, calls(app))
    local got = app:received("batch_checked")
    assert.same({ "reply", "invalid", "invalid", "reply" }, { got[1].outcome, got[2].outcome, got[3].outcome, got[4].outcome })
    assert.equal("$.amount_cents: must be >= 0", got[2].error)
    assert.equal("$.amount_cents: must be an integer, got string", got[3].error)
    local dead = {}
    for _, e in ipairs(app:entries("payments.dead")) do
      dead[#dead + 1] = e.headers["dead-letter-reason"]
    end
    assert.same({ "schema", "schema" }, dead)
    assert.same({ "1", "4" }, app:command("LRANGE", "posted", 0, -1))
    assert.same({}, app:pending("payments", "checked"))
  end)
end)

describe("handle_batch in a handler file", function()
  local handler = require "luastream.handler"
  local function problems(src)
    local chunk = assert(loadstring(src))
    local ok, err = pcall(handler.validate, chunk(), "h.lua", src)
    assert.is_false(ok)
    return err
  end

  it("refuses handle and handle_batch together, at the second's line", function()
    assert.equal("h.lua:3: fields 'handle' and 'handle_batch' set together: a handler file sets " ..
      "exactly one of 'handle', 'handle_batch', 'tick'", problems([[
return { stream = "s", group = "g",
  handle = function() end,
  handle_batch = function() end }
]]))
  end)

  it("refuses batch_max above batch, and the batch fields without handle_batch", function()
    assert.equal("h.lua:2: field 'batch_max' must be at most batch (10), got 20: a call takes its " ..
      "entries from one read", problems([[
return { stream = "s", group = "g", handle_batch = function() end, batch = 10,
  batch_max = 20 }
]]))
    assert.equal("h.lua:2: field 'batch_wait' only applies to handle_batch", problems([[
return { stream = "s", group = "g", handle = function() end,
  batch_wait = "1s" }
]]))
  end)

  it("defaults batch_max to min(batch, 100) and batch_wait to 0", function()
    local spec = handler.validate({ stream = "s", group = "g", handle_batch = function() end, batch = 30 }, "h.lua")
    assert.equal(30, spec.batch_max)
    assert.equal(0, spec.batch_wait)
    spec = handler.validate({ stream = "s", group = "g", handle_batch = function() end, batch = 500,
      batch_wait = "250ms" }, "h.lua")
    assert.equal(100, spec.batch_max)
    assert.equal(250, spec.batch_wait)
    assert.is_nil(handler.validate({ stream = "s", group = "g", handle = function() end }, "h.lua").batch_max)
  end)
end)

describe("handle_batch past its memory limit", function()
  local dir, app
  local function tempdir()
    local path = os.tmpname()
    os.remove(path)
    assert(os.execute("mkdir -p '" .. path .. "'"))
    return path
  end
  -- {grow = true} in a call fills a table the state keeps until allocation
  -- fails; {nap = true} makes its call sleep a second first.
  local function grower(workers)
    return string.format([[
local ls = require "luastream"
local keep = {}
return {
  stream = "big", group = "g", workers = %d, batch_max = 2, memory = 8 * 1024 * 1024,
  handle_batch = function(entries)
    for _, e in ipairs(entries) do
      if e.msg.grow then
        pcall(function() while true do keep[#keep + 1] = string.rep("x", 200) .. #keep end end)
        return
      end
    end
    for _, e in ipairs(entries) do if e.msg.nap then ls.sleep(1000) break end end
  end,
}
]], workers)
  end
  local function start_grower(workers)
    local f = assert(io.open(dir .. "/grow.lua", "w"))
    f:write(grower(workers))
    f:close()
    app = testing.app(dir, { handler_errors = "record" })
  end
  local function outcomes_by_n()
    local out = {}
    for _, d in ipairs(app:received("grow")) do
      local n = d.message.n
      out[n] = (out[n] and out[n] .. "," or "") .. d.outcome .. (d.reason and "/" .. d.reason or "")
    end
    return out
  end
  before_each(function() dir = tempdir() end)
  after_each(function()
    if app then app:stop() end
    app = nil
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("fails every entry of the calls running on the state, each once, and goes on in a fresh one", function()
    start_grower(2)
    add_all(app, "big", { { nap = true, n = 1 }, { n = 2 } })
    add_all(app, "big", { { grow = true, n = 3 }, { n = 4 } })
    assert.same({ "error/memory", "error/memory", "error/memory", "error/memory" }, outcomes_by_n())
    app:advance("2s") -- the first call's sleep would have ended: nothing resumes it
    app:publish("big", { n = 5 })
    local got = outcomes_by_n()
    assert.equal(5, #got)
    assert.equal("ack", got[5])
    assert.equal("error/memory", got[1])
    assert.equal(4, #app:pending("big", "g"), "the failed entries left pending, as any error")
  end)

  it("fails only the next call when it goes past the limit as the one before is applied", function()
    start_grower(1)
    add_all(app, "big", { { nap = true, n = 1 }, { n = 2 }, { grow = true, n = 3 }, { n = 4 } })
    assert.same({}, outcomes_by_n(), "the first call sleeps, the second waits for it")
    app:advance("1s")
    assert.same({ "ack", "ack", "error/memory", "error/memory" }, outcomes_by_n())
    app:publish("big", { n = 5 })
    assert.equal("ack", outcomes_by_n()[5])
    assert.equal(2, #app:pending("big", "g"))
  end)
end)
