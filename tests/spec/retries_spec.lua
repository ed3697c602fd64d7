-- Retries, delays and dead letters (docs/retries-delays-dead-letters.md)
-- on the in-memory broker with the virtual clock: max_deliveries reached by
-- retries and by handlers that never come back, the provenance of each kind of
-- dead letter, what happens without a dead_letter stream, ls.retry_after on
-- `new`, `claiming` and `reclaim` with short and long delays (also across a
-- stopped host, and with two hosts sweeping one delay set), ls.backoff, and
-- outcomes written with their ack. The handler folders beside this file are
-- named for what their handlers do.
local ls = require "luastream"

local SPEC_DIR = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")
local HERE = SPEC_DIR .. "/fixtures"

local WALL_START = 1767225600000 -- the virtual wall clock when app:now() is 0
local DEAD = "payments.dead"
local DELAYED = "payments:delayed:ledger" -- the delay set of payments / ledger
local COUNT, ORIGINAL, RETRY_GROUP =
  ls.DELIVERY_COUNT_HEADER, ls.ORIGINAL_ID_HEADER, ls.RETRY_GROUP_HEADER
local RETRY = "payments:retry:ledger" -- the retry stream of payments / ledger

-- ---- helpers -----------------------------------------------------------------

local apps = dofile(SPEC_DIR .. "/support/apps.lua")(HERE)
local start = apps.start

local function wall(app) return WALL_START + app:now() end

-- The ms part of a stream id: when the broker added the entry, on its clock.
local function id_ms(id) return tonumber(id:match("^(%d+)%-%d+$")) end

local function zcard(app, key) return assert(app:command("ZCARD", key)) end

-- Entries ever added to a stream (XINFO STREAM entries-added): the retry
-- stream is trimmed of what the group acknowledged, its length says less.
local function added(app, key)
  local info = assert(app:command("XINFO", "STREAM", key))
  for i = 1, #info, 2 do
    if info[i] == "entries-added" then return info[i + 1] end
  end
end

local function pending_ids(app)
  local ids = {}
  for i, p in ipairs(app:pending("payments", "ledger")) do ids[i] = p.id end
  return ids
end

local function contains(list, value)
  for _, v in ipairs(list) do
    if v == value then return true end
  end
  return false
end

-- The deliveries of handler across several apps (hosts of one broker).
local function received_by(list, handler)
  local out = {}
  for _, app in ipairs(list) do
    for _, d in ipairs(app:received(handler)) do out[#out + 1] = d end
  end
  return out
end

-- The dead letters on payments.dead, by the id of the entry they stand for.
local function dead_letters(app)
  local out, n = {}, 0
  for _, e in ipairs(app:entries(DEAD)) do
    local origin = e.fields["dead-letter-id"]
    assert(origin, "a dead letter without dead-letter-id")
    assert(out[origin] == nil, "two dead letters for " .. origin)
    out[origin] = e
    n = n + 1
  end
  return out, n
end

-- Moves the clock by step until cond() holds (at most limit ms); returns the
-- clock then.
local function advance_until(app, cond, step, limit, what)
  local deadline = app:now() + limit
  while not cond() do
    assert(app:now() < deadline, what .. ": not within " .. limit .. " ms")
    app:advance(step)
  end
  return app:now()
end

after_each(apps.stop_all)

-- ---- max_deliveries ------------------------------------------------------------

describe("max_deliveries", function()
  it("sets aside an entry retried on each of 3 claimed deliveries, never handing it over a 4th time", function()
    local app = start("retry_always_claiming")
    local id = app:publish("payments", { id = 1, account = "acme" }, { key = "acme" })
    local got = app:received("retry_payment")
    assert.equal(1, #got)
    assert.equal("retry", got[1].outcome)
    assert.equal("0", got[1].headers[COUNT])

    app:advance("29s") -- not idle min_idle yet
    assert.equal(1, #app:received("retry_payment"))

    app:advance("2s")
    got = app:received("retry_payment")
    assert.equal(2, #got)
    assert.equal(id, got[2].id)
    assert.equal("1", got[2].headers[COUNT])
    assert.equal(0, app:xlen(DEAD))
    assert.equal(2, app:pending("payments", "ledger")[1].deliveries)

    app:advance("31s")
    got = app:received("retry_payment")
    assert.equal(3, #got)
    assert.equal(id, got[3].id)
    assert.equal("2", got[3].headers[COUNT])
    -- the third delivery retried: set aside at once
    local dl, n = dead_letters(app)
    assert.equal(1, n)
    assert.equal("max-deliveries", dl[id].fields["dead-letter-reason"])
    assert.equal("3", dl[id].fields["dead-letter-deliveries"])
    assert.equal("retried on delivery 3 of 3", dl[id].fields["dead-letter-error"])
    assert.same({}, app:pending("payments", "ledger"))

    app:advance("5m")
    assert.equal(3, #app:received("retry_payment"))
    assert.equal(1, app:xlen(DEAD))
    assert.equal(1, app:xlen("payments"))
  end)

  it("counts the retry copies on `new` and sets the third delivery aside", function()
    local app = start("retry_always_new")
    local id = app:publish("payments", { id = 1, account = "acme" }, { key = "acme" })
    local got = app:received("retry_payment")
    assert.equal(3, #got)
    assert.equal(id, got[1].id)
    assert.is_nil(got[1].headers[COUNT])
    for k = 2, 3 do
      -- a copy on the retry stream (whose ids may equal the shared stream's)
      assert.equal(got[k].id, app:entries(RETRY)[k - 1].id, "delivery " .. k .. " is a copy")
      assert.equal(tostring(k - 1), got[k].headers[COUNT])
      assert.equal(id, got[k].headers[ORIGINAL])
      assert.is_nil(got[k].headers[RETRY_GROUP])
      assert.same(got[1].message, got[k].message)
    end
    assert.equal(1, app:xlen("payments")) -- the original only: copies go to the retry stream
    assert.equal(2, app:xlen(RETRY))

    local dl, n = dead_letters(app)
    assert.equal(1, n)
    local f = assert(dl[id], "set aside under the original id").fields
    assert.equal("max-deliveries", f["dead-letter-reason"])
    assert.equal("3", f["dead-letter-deliveries"])
    assert.equal(id, f[ORIGINAL])
    assert.equal("acme", f["partition-key"])
    assert.same({}, app:pending("payments", "ledger"))
    assert.same({}, app:pending(RETRY, "ledger"))

    app:advance("1m")
    assert.equal(3, #app:received("retry_payment"))
    assert.equal(1, app:xlen("payments"))
    assert.equal(2, added(app, RETRY), "two copies, no more")
    assert.equal(0, app:xlen(RETRY), "acknowledged copies trimmed")
  end)

  it("sets aside without calling the handler an entry that arrives on the retry stream delivered max_deliveries times", function()
    local app = start("retry_always_new")
    local id = assert(app:command("XADD", RETRY, "*", "data", '{"id":9}', COUNT, "3"))
    app:settle()
    assert.same({}, app:received("retry_payment"))
    local dl, n = dead_letters(app)
    assert.equal(1, n)
    assert.equal("max-deliveries", dl[id].fields["dead-letter-reason"])
    assert.equal("3", dl[id].fields["dead-letter-deliveries"])
    assert.equal("delivered 3 times without an ack", dl[id].fields["dead-letter-error"])
    assert.equal("payments", dl[id].fields["dead-letter-stream"])
    assert.same({}, app:pending(RETRY, "ledger"))
  end)

  it("stops a crash loop: an entry whose host dies each time is claimed 3 times, then set aside", function()
    -- Each delivery hangs its host's handler, and the host dies (app:stop()
    -- abandons the handler, as a killed host would): the entry is never
    -- acked, and after min_idle the next host claims it.
    local first = start("hang_forever", { consumer = "host-1" })
    local id = first:publish("payments", { id = 1, account = "acme" }, { key = "acme" })
    local started = first:records("handler started")
    assert.equal(1, #started)
    assert.equal("0", started[1].delivery_count)
    first:stop()

    for k = 1, 2 do
      local host = start("hang_forever", { consumer = "host-" .. (k + 1), with = first })
      host:advance("31s")
      started = host:records("handler started")
      assert.equal(k + 1, #started, "claim " .. k)
      assert.equal(id, started[k + 1].entry_id)
      assert.equal("host-" .. (k + 1), started[k + 1].consumer)
      assert.equal(tostring(k), started[k + 1].delivery_count, "the count rises with each claim")
      local pending = host:pending("payments", "ledger")
      assert.equal(1, #pending)
      assert.equal(k + 1, pending[1].deliveries)
      assert.equal(0, host:xlen(DEAD))
      host:stop()
    end

    local last = start("hang_forever", { consumer = "host-4", with = first })
    last:advance("31s") -- claimed a 4th time: set aside instead of handed over
    assert.equal(3, #last:records("handler started"))
    local dl, n = dead_letters(last)
    assert.equal(1, n)
    local f = assert(dl[id]).fields
    assert.equal("max-deliveries", f["dead-letter-reason"])
    assert.equal("3", f["dead-letter-deliveries"])
    assert.equal("delivered 3 times without an ack", f["dead-letter-error"])
    assert.equal("hang_payment.lua", f["dead-letter-handler"])
    assert.same({}, last:pending("payments", "ledger"))
    last:advance("2m")
    assert.equal(3, #last:records("handler started"))
  end)

  it("stops a crash loop on `new`: an entry abandoned at each shutdown deadline comes back counted 3 times, then is set aside", function()
    -- A `new` subscription never claims: a host stopped with the handler
    -- running gives the entry back at the deadline through the group's
    -- retry stream, and the delivery it ran counts.
    local first = start("hang_forever_new", { consumer = "host-1" })
    local id = first:publish("payments", { id = 1, account = "acme" }, { key = "acme" })
    local started = first:records("handler started")
    assert.equal(1, #started)
    assert.is_nil(started[1].delivery_count, "a `>` read carries no count")
    first:stop()

    for k = 1, 2 do
      local host = start("hang_forever_new", { consumer = "host-1", with = first })
      host:advance("20s")
      started = host:records("handler started") -- the log of every host of the broker
      assert.equal(k + 1, #started, "restart " .. k)
      assert.equal(id, started[k + 1].source_id)
      assert.equal(tostring(k), started[k + 1].delivery_count, "deliveries before this one")
      assert.same({}, host:pending("payments", "ledger"), "given back through the retry stream")
      assert.equal(1, #host:pending("payments:retry:ledger", "ledger"))
      assert.equal(0, host:xlen(DEAD))
      host:stop()
    end

    local last = start("hang_forever_new", { consumer = "host-1", with = first })
    last:advance("20s") -- read a 4th time: set aside instead of handed over
    assert.equal(3, #last:records("handler started"))
    local dl, n = dead_letters(last)
    assert.equal(1, n)
    local f = assert(dl[id]).fields
    assert.equal("max-deliveries", f["dead-letter-reason"])
    assert.equal("3", f["dead-letter-deliveries"])
    assert.equal("delivered 3 times without an ack", f["dead-letter-error"])
    assert.same({}, last:pending("payments", "ledger"))
    last:advance("2m")
    assert.equal(3, #last:records("handler started"))
  end)

  it("does not take back an entry its own handler still runs, however long it takes", function()
    local app = start("hang_forever", { consumer = "host-1" })
    app:publish("payments", { id = 1, account = "acme" }, { key = "acme" })
    app:advance("5m") -- ten times min_idle: the host's own claims find it still running here
    assert.equal(1, #app:records("handler started"))
    assert.equal(0, app:xlen(DEAD))
  end)
end)

-- ---- dead letters and their provenance ------------------------------------------

describe("dead letters", function()
  local PROVENANCE = {
    "dead-letter-stream", "dead-letter-group", "dead-letter-id", "dead-letter-deliveries",
    "dead-letter-handler", "dead-letter-reason", "dead-letter-error", "dead-letter-time",
    "dead-letter-cut",
  }

  -- Checks the one dead letter of original (an entry of payments, as
  -- app:entries gives it) against the expected provenance, and that it holds
  -- every field of the original besides. Returns its fields.
  local function assert_dead_letter(app, original, expected)
    local dl = dead_letters(app)
    local e = assert(dl[original.id], "no dead letter for " .. original.id)
    local f = e.fields
    assert.equal("payments", f["dead-letter-stream"])
    assert.equal("ledger", f["dead-letter-group"])
    assert.equal(original.id, f["dead-letter-id"])
    assert.equal("sort_payment.lua", f["dead-letter-handler"])
    assert.equal(expected.reason, f["dead-letter-reason"])
    assert.equal(expected.deliveries, f["dead-letter-deliveries"])
    if expected.error then assert.equal(expected.error, f["dead-letter-error"]) end
    if expected.error_has then
      for _, part in ipairs(expected.error_has) do
        assert.matches(part, f["dead-letter-error"], 1, true)
      end
    end
    -- the time: on the virtual wall clock, when the dead letter was written
    assert.equal(tostring(id_ms(e.id)), f["dead-letter-time"])
    if expected.time then assert.equal(tostring(expected.time), f["dead-letter-time"]) end
    -- the original's fields, all of them, unchanged
    local extra = 0
    for k, v in pairs(original.fields) do assert.equal(v, f[k], "field " .. k .. " kept") end
    for k in pairs(f) do
      if original.fields[k] == nil and not contains(PROVENANCE, k) then extra = extra + 1 end
    end
    assert.equal(0, extra, "the dead letter holds only the original's fields and the provenance")
    return f
  end

  local function entry(app, id)
    for _, e in ipairs(app:entries("payments")) do
      if e.id == id then return e end
    end
    error("no entry " .. id .. " on payments")
  end

  local app
  before_each(function() app = start("dead_letter_each_reason", { handler_errors = "record" }) end)

  it("rejected: ls.reject(why) sets the entry aside on its first delivery with why", function()
    local id = app:publish("payments", { id = 1, account = "closed-acme", action = "reject",
      why = "account closed-acme is closed" }, { key = "closed-acme", headers = { source = "checkout" } })
    assert.equal(0, app:now())
    local f = assert_dead_letter(app, entry(app, id), { reason = "rejected", deliveries = "1",
      error = "account closed-acme is closed", time = WALL_START })
    assert.equal("checkout", f.source)
    assert.equal("reject", app:received("sort_payment")[1].outcome)
    assert.same({}, app:pending("payments", "ledger"))
    local logged = app:records("entry dead-lettered")
    assert.equal(1, #logged)
    assert.equal("warn", logged[1].level)
    assert.equal("rejected", logged[1].reason)
  end)

  it("rejected: ls.reject() without a reason says rejected", function()
    local id = app:publish("payments", { id = 2, action = "reject" })
    assert_dead_letter(app, entry(app, id), { reason = "rejected", deliveries = "1",
      error = "rejected", time = WALL_START })
    assert.same({}, app:pending("payments", "ledger"))
  end)

  it("decode-error: a body that is not JSON is set aside without calling the handler", function()
    local id = assert(app:command("XADD", "payments", "*", "data", "{not json", "partition-key", "acme",
      "source", "checkout"))
    app:settle()
    assert_dead_letter(app, entry(app, id), { reason = "decode-error", deliveries = "1",
      error_has = { "body is not valid JSON" }, time = WALL_START })
    local got = app:received("sort_payment")
    assert.equal(1, #got)
    assert.equal("invalid", got[1].outcome)
    assert.equal("decode-error", got[1].reason)
    assert.same({}, app:pending("payments", "ledger"))
  end)

  it("too-large: a body over max_body is set aside as read, without reaching the handler's state", function()
    local id = app:publish("payments", { id = 4, note = string.rep("x", 300) }, { key = "acme" })
    local e = entry(app, id)
    local body = e.fields.data
    local f = assert_dead_letter(app, e, { reason = "too-large", deliveries = "1",
      error = string.format("body is %d bytes, over max_body (200)", #body), time = WALL_START })
    -- the size it had (its fields, under 1024 bytes each, are all there)
    local size = 0
    for k, v in pairs(e.fields) do size = size + #k + #v + 64 end -- 64 a field (entry.h)
    assert.equal(tostring(size), f["dead-letter-cut"])
    assert.same({}, app:received("sort_payment"))
    assert.same({}, app:pending("payments", "ledger"))
  end)

  it("no-fields: an entry with nothing to deliver is set aside without calling the handler", function()
    local id = assert(app:command("XADD", "payments", "*", "partition-key", "acme"))
    app:settle()
    assert_dead_letter(app, entry(app, id), { reason = "no-fields", deliveries = "1",
      error = "entry has no data field and no other field to deliver", time = WALL_START })
    assert.equal("invalid", app:received("sort_payment")[1].outcome)
    assert.same({}, app:pending("payments", "ledger"))
  end)

  it("max-deliveries: a retry on the last allowed delivery sets the entry aside", function()
    local id = app:publish("payments", { id = 6, action = "retry" }, { key = "acme" })
    assert.equal(0, app:xlen(DEAD))
    assert.same({ id }, pending_ids(app))
    local before = wall(app)
    app:advance("31s")
    local f = assert_dead_letter(app, entry(app, id), { reason = "max-deliveries", deliveries = "2",
      error = "retried on delivery 2 of 2" })
    local t = tonumber(f["dead-letter-time"])
    assert.is_true(t >= before + 30000 and t <= wall(app), "dead-letter-time " .. t .. " not at the claim")
    assert.equal(2, #app:received("sort_payment"))
    assert.same({}, app:pending("payments", "ledger"))
  end)

  it("handler-error: an error on the last allowed delivery sets the entry aside with the error", function()
    local id = app:publish("payments", { id = 7, action = "raise" }, { key = "acme" })
    assert.equal("error", app:received("sort_payment")[1].outcome)
    assert.equal(0, app:xlen(DEAD), "not on the first of two deliveries")
    assert.same({ id }, pending_ids(app))
    local before = wall(app)
    app:advance("31s")
    local got = app:received("sort_payment")
    assert.equal(2, #got)
    assert.equal("error", got[2].outcome)
    local f = assert_dead_letter(app, entry(app, id), { reason = "handler-error", deliveries = "2",
      error_has = { "ledger unavailable for payment 7", "sort_payment.lua", "stack traceback" } })
    local t = tonumber(f["dead-letter-time"])
    assert.is_true(t >= before + 30000 and t <= wall(app), "dead-letter-time " .. t .. " not at the claim")
    assert.same({}, app:pending("payments", "ledger"))
  end)

  it("sets aside only what cannot be handled: posted payments stay off the dead-letter stream", function()
    app:publish("payments", { id = 8, action = "post" })
    app:publish("payments", { id = 9, action = "reject", why = "no" })
    app:advance("2m")
    local _, n = dead_letters(app)
    assert.equal(1, n)
    assert.equal(2, app:xlen("payments"))
    assert.same({}, app:pending("payments", "ledger"))
  end)
end)

describe("without a dead_letter stream", function()
  local app
  before_each(function() app = start("no_dead_letter", { handler_errors = "record" }) end)

  local function logged_for(msg, id)
    local out = {}
    for _, r in ipairs(app:records(msg)) do
      if r.id == id then out[#out + 1] = r end
    end
    return out
  end

  it("acks a rejected entry and logs it at error level", function()
    local id = app:publish("payments", { id = 1, action = "reject", why = "account closed" })
    assert.same({}, app:pending("payments", "ledger"))
    local rec = logged_for("entry rejected, acked (no dead_letter stream)", id)
    assert.equal(1, #rec)
    assert.equal("error", rec[1].level)
    assert.equal("rejected", rec[1].reason)
    assert.equal("account closed", rec[1].error)
    assert.equal(0, app:xlen(DEAD))
  end)

  it("leaves bad input pending and logs it at error level", function()
    local bad = {
      ["decode-error"] = assert(app:command("XADD", "payments", "*", "data", "{not json")),
      ["too-large"] = assert(app:command("XADD", "payments", "*", "data",
        '{"note":"' .. string.rep("x", 300) .. '"}')),
      ["no-fields"] = assert(app:command("XADD", "payments", "*", "partition-key", "acme")),
    }
    app:settle()
    local pending = pending_ids(app)
    assert.equal(3, #pending)
    for reason, id in pairs(bad) do
      assert.is_true(contains(pending, id), reason .. " entry " .. id .. " left pending")
      local rec = logged_for("bad entry left pending", id)
      assert.equal(1, #rec, reason)
      assert.equal("error", rec[1].level)
      assert.equal(reason, rec[1].reason)
    end
    assert.equal(0, app:xlen(DEAD))
  end)

  it("leaves an entry at max_deliveries pending, logs it, and never hands it over again", function()
    local retried = app:publish("payments", { id = 6, action = "retry" })
    local failed = app:publish("payments", { id = 7, action = "raise" })
    app:advance("31s")
    assert.equal(4, #app:received("sort_payment"))
    local pending = pending_ids(app)
    assert.equal(2, #pending)
    assert.is_true(contains(pending, retried) and contains(pending, failed))
    local limit = "delivery limit reached, entry left pending (no dead_letter stream)"
    local rec = logged_for(limit, retried)
    assert.equal(1, #rec)
    assert.equal("error", rec[1].level)
    assert.equal("max-deliveries", rec[1].reason)
    assert.equal("2", rec[1].deliveries)
    rec = logged_for(limit, failed)
    assert.equal(1, #rec)
    assert.equal("handler-error", rec[1].reason)

    app:advance("31s") -- claimed again: logged again, not handed over
    assert.equal(4, #app:received("sort_payment"))
    assert.equal(2, #logged_for(limit, retried))
    assert.equal(2, #logged_for(limit, failed))
    assert.equal(2, #app:pending("payments", "ledger"))
    assert.equal(0, app:xlen(DEAD))
  end)
end)

-- ---- ls.retry_after --------------------------------------------------------------

describe("ls.retry_after", function()
  it("on `new`: acks the entry into the delay set and delivers it as a new entry once due, not before", function()
    local app = start("delay_on_new")
    local id = app:publish("payments", { id = 1, account = "acme", delay = "10s" }, { key = "acme" })
    local got = app:received("defer_payment")
    assert.equal(1, #got)
    assert.equal("retry_after", got[1].outcome)
    assert.same({}, app:pending("payments", "ledger"))
    assert.equal(1, app:xlen("payments"))
    local member = assert(app:command("ZRANGE", DELAYED, "0", "-1", "WITHSCORES"))
    assert.equal(2, #member)
    assert.equal(WALL_START + 10000, tonumber(member[2]))

    app:advance(9999)
    assert.equal(1, #app:received("defer_payment"))
    assert.equal(1, app:xlen("payments"))
    assert.equal(1, zcard(app, DELAYED))

    app:advance(1001)
    got = app:received("defer_payment")
    assert.equal(2, #got)
    local again = got[2]
    assert.not_equal(id, again.id)
    local at = id_ms(again.id) - WALL_START
    assert.is_true(at >= 10000 and at <= 11000, "back on the stream at " .. at .. " ms")
    assert.equal("1", again.headers[COUNT])
    assert.is_nil(again.headers[RETRY_GROUP])
    assert.equal(id, again.headers[ORIGINAL])
    assert.equal("acme", again.headers["partition-key"])
    assert.same(got[1].message, again.message)
    assert.equal("ack", again.outcome)
    assert.equal(1, app:xlen("payments"), "never back on the shared stream")
    assert.equal(1, added(app, RETRY), "back on the group's retry stream, once")
    assert.same({}, app:pending(RETRY, "ledger"))
    assert.equal(0, zcard(app, DELAYED))
    assert.same({}, app:pending("payments", "ledger"))

    app:advance("1m")
    assert.equal(2, #app:received("defer_payment"))
  end)

  it("on `new`: the count travels with the delayed entry, so max_deliveries still applies", function()
    local app = start("delay_on_new")
    local id = app:publish("payments", { id = 1, delay = "5s", delays = 99 })
    app:advance("20s")
    local got = app:received("defer_payment")
    assert.equal(3, #got)
    assert.is_nil(got[1].headers[COUNT])
    assert.equal("1", got[2].headers[COUNT])
    assert.equal("2", got[3].headers[COUNT])
    local dl, n = dead_letters(app)
    assert.equal(1, n)
    local f = assert(dl[id]).fields
    assert.equal("max-deliveries", f["dead-letter-reason"])
    assert.equal("3", f["dead-letter-deliveries"])
    assert.equal(id, f[ORIGINAL])
    assert.equal("payments", f["dead-letter-stream"])
    assert.equal(0, zcard(app, DELAYED))
    app:advance("1m")
    assert.equal(3, #app:received("defer_payment"))
  end)

  it("on `claiming` with a delay up to min_idle: the same entry comes back after the delay, not a copy", function()
    local app = start("delay_on_claiming")
    local id = app:publish("payments", { id = 1, delay = "5s" })
    local got = app:received("defer_payment")
    assert.equal("retry_after", got[1].outcome)
    assert.same({ id }, pending_ids(app))
    assert.equal(0, assert(app:command("EXISTS", DELAYED)))

    app:advance(4999)
    assert.equal(1, #app:received("defer_payment"))

    app:advance(1001)
    got = app:received("defer_payment")
    assert.equal(2, #got)
    assert.equal(id, got[2].id)
    assert.equal("1", got[2].headers[COUNT])
    assert.equal("ack", got[2].outcome)
    assert.equal(1, app:xlen("payments"))
    assert.equal(0, assert(app:command("EXISTS", DELAYED)))
    assert.same({}, app:pending("payments", "ledger"))
  end)

  it("on `claiming` with a delay of exactly min_idle: the entry still waits pending", function()
    local app = start("delay_on_claiming")
    local id = app:publish("payments", { id = 1, delay = "30s" })
    assert.same({ id }, pending_ids(app))
    assert.equal(0, assert(app:command("EXISTS", DELAYED)))
    app:advance(29999)
    assert.equal(1, #app:received("defer_payment"))
    app:advance(1001)
    local got = app:received("defer_payment")
    assert.equal(2, #got)
    assert.equal(id, got[2].id)
    assert.equal("1", got[2].headers[COUNT])
    assert.equal(1, app:xlen("payments"))
  end)

  it("on `claiming` with a delay over min_idle: acked into the delay set, back as a new entry once due", function()
    local app = start("delay_on_claiming")
    local id = app:publish("payments", { id = 1, delay = "2m" })
    assert.same({}, app:pending("payments", "ledger"))
    assert.equal(WALL_START + 120000, tonumber(assert(app:command("ZSCORE", DELAYED,
      assert(app:command("ZRANGE", DELAYED, "0", "0"))[1]))))

    app:advance(119999) -- min_idle passed four times: nothing pending to claim
    assert.equal(1, #app:received("defer_payment"))
    assert.equal(1, zcard(app, DELAYED))

    app:advance(1001)
    local got = app:received("defer_payment")
    assert.equal(2, #got)
    assert.not_equal(id, got[2].id)
    assert.equal("1", got[2].headers[COUNT])
    assert.equal(id, got[2].headers[ORIGINAL])
    assert.equal("ack", got[2].outcome)
    assert.equal(1, app:xlen("payments"))
    assert.equal(1, added(app, RETRY))
    assert.equal(0, zcard(app, DELAYED))
  end)

  it("on `claiming`, short delays: the count travels with the pending entry to max_deliveries", function()
    local app = start("delay_on_claiming")
    local id = app:publish("payments", { id = 1, delay = "5s", delays = 99 })
    app:advance("20s")
    local got = app:received("defer_payment")
    assert.equal(3, #got)
    for k = 1, 3 do
      assert.equal(id, got[k].id)
      assert.equal(tostring(k - 1), got[k].headers[COUNT])
    end
    local dl, n = dead_letters(app)
    assert.equal(1, n)
    assert.equal("max-deliveries", dl[id].fields["dead-letter-reason"])
    assert.equal("3", dl[id].fields["dead-letter-deliveries"])
    assert.equal(1, app:xlen("payments"))
    assert.same({}, app:pending("payments", "ledger"))
  end)

  it("on `claiming`, long delays: the count travels with the delayed entry to max_deliveries", function()
    local app = start("delay_on_claiming")
    local id = app:publish("payments", { id = 1, delay = "1m", delays = 99 })
    app:advance("3m")
    local got = app:received("defer_payment")
    assert.equal(3, #got)
    assert.equal("0", got[1].headers[COUNT])
    assert.equal("1", got[2].headers[COUNT])
    assert.equal("2", got[3].headers[COUNT])
    assert.equal(id, got[3].headers[ORIGINAL])
    local dl, n = dead_letters(app)
    assert.equal(1, n)
    local f = assert(dl[id]).fields
    assert.equal("max-deliveries", f["dead-letter-reason"])
    assert.equal("3", f["dead-letter-deliveries"])
    assert.equal(1, app:xlen("payments"))
    assert.equal(2, added(app, RETRY))
    assert.equal(0, zcard(app, DELAYED))
  end)

  it("on `reclaim` with a delay up to min_idle: the same entry is reclaimed after the delay, not before", function()
    local app = start("delay_on_reclaim", { handler_errors = "record" })
    local id = app:publish("payments", { id = 1, delay = "5s" })
    assert.equal("error", app:received("post_new_payment")[1].outcome)
    app:advance(29999)
    assert.same({}, app:received("defer_reclaimed_payment"))
    local reclaimed = advance_until(app, function() return #app:received("defer_reclaimed_payment") > 0 end,
      10, 1100, "the first reclaim")
    local got = app:received("defer_reclaimed_payment")
    assert.equal(id, got[1].id)
    assert.equal("2", got[1].headers[COUNT])
    assert.equal("retry_after", got[1].outcome)
    assert.same({ id }, pending_ids(app))

    app:advance(reclaimed + 4989 - app:now()) -- at least 10 ms before it is due
    assert.equal(1, #app:received("defer_reclaimed_payment"))

    app:advance(1100)
    got = app:received("defer_reclaimed_payment")
    assert.equal(2, #got)
    assert.equal(id, got[2].id)
    assert.equal("3", got[2].headers[COUNT])
    assert.equal("ack", got[2].outcome)
    assert.equal(1, app:xlen("payments"))
    assert.equal(0, assert(app:command("EXISTS", DELAYED)))
    assert.same({}, app:pending("payments", "ledger"))
  end)

  it("survives its host: a host stopped mid-delay, another delivers the entry on time (`new`)", function()
    local one = start("delay_on_new", { consumer = "host-1" })
    local id = one:publish("payments", { id = 1, delay = "1m" })
    assert.equal("retry_after", one:received("defer_payment")[1].outcome)
    one:stop()
    local two = start("delay_on_new", { consumer = "host-2", with = one })
    assert.equal(1, zcard(two, DELAYED))

    two:advance(59999)
    assert.same({}, two:received("defer_payment"))
    assert.equal(1, two:xlen("payments"))

    two:advance(1001)
    local got = two:received("defer_payment")
    assert.equal(1, #got)
    assert.equal(id, got[1].headers[ORIGINAL])
    assert.equal("1", got[1].headers[COUNT])
    local at = id_ms(got[1].id) - WALL_START
    assert.is_true(at >= 60000 and at <= 61000, "back on the stream at " .. at .. " ms")
    assert.equal(0, zcard(two, DELAYED))
    assert.same({}, two:pending("payments", "ledger"))
  end)

  it("survives its host: a host stopped mid-delay, another claims the entry on time (`claiming`)", function()
    local one = start("delay_on_claiming", { consumer = "host-1" })
    local id = one:publish("payments", { id = 1, delay = "5s" })
    one:stop()
    local two = start("delay_on_claiming", { consumer = "host-2", with = one })
    assert.equal("host-1", two:pending("payments", "ledger")[1].consumer)

    two:advance(4999)
    assert.same({}, two:received("defer_payment"))

    two:advance(1001)
    local got = two:received("defer_payment")
    assert.equal(1, #got)
    assert.equal(id, got[1].id)
    assert.equal("1", got[1].headers[COUNT])
    assert.equal("ack", got[1].outcome)
    assert.same({}, two:pending("payments", "ledger"))
    assert.equal(1, two:xlen("payments"))
  end)

  it("two hosts sweeping one delay set never move an entry twice", function()
    local a = start("delay_on_new", { consumer = "host-a" })
    local b = start("delay_on_new", { consumer = "host-b", with = a })
    local ids = {}
    for i = 1, 10 do ids[i] = a:publish("payments", { id = i, delay = "10s" }) end
    assert.equal(10, #received_by({ a, b }, "defer_payment"))
    assert.equal(10, zcard(a, DELAYED))

    a:advance("11s")
    assert.equal(10, added(a, RETRY), "each delayed entry back exactly once")
    assert.equal(0, zcard(a, DELAYED))
    local again = {}
    for _, d in ipairs(received_by({ a, b }, "defer_payment")) do
      if d.headers[COUNT] == "1" then
        local orig = d.headers[ORIGINAL]
        assert.is_nil(again[orig], "delivered twice: " .. tostring(orig))
        again[orig] = true
      end
    end
    for _, id in ipairs(ids) do assert.is_true(again[id], "never delivered again: " .. id) end
    assert.equal(20, #received_by({ a, b }, "defer_payment"))

    a:advance("1m")
    assert.equal(10, a:xlen("payments"))
    assert.equal(10, added(a, RETRY))
    assert.equal(0, a:xlen(RETRY), "all acknowledged: trimmed")
    assert.equal(20, #received_by({ a, b }, "defer_payment"))
  end)
end)

-- ---- ls.backoff ------------------------------------------------------------------

describe("ls.backoff", function()
  it("gives base * factor ^ count, at most max, from a count or a ctx", function()
    local backoff = ls.backoff { base = "1s", factor = 2, max = "5m" }
    assert.equal(1000, backoff(0))
    assert.equal(2000, backoff(1))
    assert.equal(8000, backoff(3))
    assert.equal(256000, backoff(8))
    assert.equal(300000, backoff(9))
    assert.equal(300000, backoff(40))
    assert.equal(4000, backoff({ headers = { [COUNT] = "2" } }))
    assert.equal(1000, backoff({ headers = {} }), "no delivery-count: none before")
    assert.equal(2250, ls.backoff { base = "250ms", factor = 3, max = "1m" } (2))
    assert.equal(60000, ls.backoff { base = "250ms", factor = 3, max = "1m" } (10))
  end)

  it("defaults to 1s, doubling, at most 5m, without jitter", function()
    local backoff = ls.backoff()
    assert.equal(1000, backoff(0))
    assert.equal(1000, backoff(0))
    assert.equal(32000, backoff(5))
    assert.equal(300000, backoff(9))
  end)

  it("spreads each delay by up to jitter either way, never over max", function()
    math.randomseed(42)
    local backoff = ls.backoff { base = "1s", factor = 2, max = "5m", jitter = 0.2 }
    for count = 0, 8 do
      local d = 1000 * 2 ^ count
      local lo, hi = math.huge, 0
      for _ = 1, 300 do
        local v = backoff(count)
        assert.is_true(v >= math.floor(d * 0.8) and v <= d * 1.2,
          string.format("count %d: %d outside %d +/- 20%%", count, v, d))
        assert.equal(math.floor(v), v)
        lo, hi = math.min(lo, v), math.max(hi, v)
      end
      assert.is_true(lo < d * 0.95 and hi > d * 1.05,
        string.format("count %d: no spread (%d..%d)", count, lo, hi))
    end
    local below = false
    for _ = 1, 300 do
      local v = backoff(20)
      assert.is_true(v >= 240000 and v <= 300000, "over the cap: " .. v)
      below = below or v < 300000
    end
    assert.is_true(below, "jitter spreads capped delays too")
  end)

  it("refuses a factor below 1, a jitter outside [0, 1) and a base that is not a duration", function()
    assert.has_error(function() ls.backoff { factor = 0.5 } end, "ls.backoff: factor must be a number >= 1")
    assert.has_error(function() ls.backoff { jitter = 1 } end, "ls.backoff: jitter must be a fraction in [0, 1)")
    assert.has_error(function() ls.backoff { base = "soon" } end, "ls.backoff: base must be a duration")
  end)

  it("drives ls.retry_after in a handler: 1s, 2s, 4s, then the 5s cap, until max_deliveries", function()
    local app = start("backoff_on_new")
    local id = app:publish("payments", { id = 1 })
    app:advance("30s")
    local got = app:received("back_off_payment")
    assert.equal(5, #got)
    local delays = {}
    for i, r in ipairs(app:records("payment deferred")) do
      assert.equal(got[i].id, r.entry_id)
      delays[i] = tonumber(r.delay_ms)
    end
    assert.same({ 1000, 2000, 4000, 5000, 5000 }, delays)
    -- each came back once its delay had passed, within the sweeper's second
    for k = 1, 4 do
      local gap = id_ms(got[k + 1].id) - id_ms(got[k].id)
      assert.is_true(gap >= delays[k] and gap <= delays[k] + 1000,
        string.format("delivery %d came %d ms after delivery %d, deferred %d ms", k + 1, gap, k, delays[k]))
      assert.equal(tostring(k), got[k + 1].headers[COUNT])
    end
    local dl, n = dead_letters(app)
    assert.equal(1, n)
    local f = assert(dl[id]).fields
    assert.equal("max-deliveries", f["dead-letter-reason"])
    assert.equal("5", f["dead-letter-deliveries"])
    assert.equal(id, f[ORIGINAL])
    assert.equal(0, zcard(app, DELAYED))
  end)

  it("counts with the host's count: a producer's delivery-count header does not stretch the delays", function()
    local app = start("backoff_on_new")
    app:publish("payments", { id = 1 }, { headers = { [COUNT] = "20" } })
    app:advance("30s")
    local delays = {}
    for i, r in ipairs(app:records("payment deferred")) do delays[i] = tonumber(r.delay_ms) end
    assert.same({ 1000, 2000, 4000, 5000, 5000 }, delays)
  end)
end)

-- ---- outcomes written with their ack -----------------------------------------------

describe("outcomes written with their ack", function()
  local function written(app)
    return { debits = app:xlen("ledger.debits"), credits = app:xlen("ledger.credits"),
             replies = app:xlen("payments.posted") }
  end

  it("writes a reply and the ctx:publish entries together with the ack", function()
    local app = start("publish_with_ack")
    local id = app:publish("payments", { id = 1, amount_cents = 500 })
    assert.equal("reply", app:received("post_payment")[1].outcome)
    assert.same({ debits = 1, credits = 1, replies = 1 }, written(app))
    assert.same({}, app:pending("payments", "ledger"))
    local reply = app:entries("payments.posted")[1]
    assert.same({ payment_id = 1, posted = true }, reply.message)
    assert.equal(id, reply.headers[ORIGINAL])
    assert.same({ payment_id = 1, amount_cents = 500 }, app:entries("ledger.debits")[1].message)
  end)

  it("writes nothing that was published until the handler acks, then all of it with the ack", function()
    local app = start("publish_with_ack")
    local id = app:publish("payments", { id = 2, amount_cents = 700, pause = 5000 })
    app:advance(4999)
    assert.same({ debits = 0, credits = 0, replies = 0 }, written(app))
    assert.same({ id }, pending_ids(app))
    app:advance(1)
    assert.same({ debits = 1, credits = 1, replies = 1 }, written(app))
    assert.same({}, app:pending("payments", "ledger"))
  end)

  it("writes nothing when the handler raises after publishing, and the entry stays pending", function()
    local app = start("publish_with_ack", { handler_errors = "record" })
    local id = app:publish("payments", { id = 3, amount_cents = 900, fail = true })
    local got = app:received("post_payment")
    assert.equal(1, #got)
    assert.equal("error", got[1].outcome)
    assert.matches("ledger write refused for payment 3", got[1].error, 1, true)
    assert.same({ debits = 0, credits = 0, replies = 0 }, written(app))
    assert.same({ id }, pending_ids(app))
  end)

  it("writes nothing that was published when the handler asks for a delay", function()
    local app = start("publish_with_ack")
    app:publish("payments", { id = 4, amount_cents = 900, defer = "1h" })
    assert.equal("retry_after", app:received("post_payment")[1].outcome)
    assert.same({ debits = 0, credits = 0, replies = 0 }, written(app))
    assert.equal(1, zcard(app, DELAYED))
    assert.same({}, app:pending("payments", "ledger"))
  end)
end)
