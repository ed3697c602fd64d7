-- Retries, delays and dead letters against a real redis-server: dead letters
-- with their provenance (reject, bad input, max_deliveries by retries, by
-- handler errors and by crashes), what happens without a dead_letter stream,
-- ls.retry_after on `new` (the delay set and its sweeper, two hosts sharing
-- it) and on `claiming` (a re-stamped pending entry), outcomes written with
-- their ack in one script call (reply, ctx:publish, dead letter), the
-- dead-letters CLI (list, replay), and dead letters never lost: a host killed
-- while its outcome waits on the server or at any moment, and an ack the
-- server refuses.
local helper = require "tests.integration.helper"
local cjson = require "cjson"

local READY = 'msg="host ready"'
local DEAD_LETTERED = { msg = "entry dead-lettered" }

-- ---- helpers -----------------------------------------------------------------

-- Returns the host and its handlers folder (what `dead-letters replay` reads).
local function start_host(srv, files, args)
  local dir = helper.handlers_dir(files)
  local h = helper.host_start(args or {}, { server = srv, dir = dir })
  h:wait_log(READY, 20, { plain = true })
  return h, dir
end

-- The server's clock in Unix ms (dead-letter-time comes from the same machine).
local function server_ms(srv)
  local t = assert(srv:call("TIME"))
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function wait_xlen(srv, stream, n, timeout_s, what)
  helper.wait_until(function()
    local len = srv:xlen(stream)
    return len >= n, len .. " on " .. stream
  end, timeout_s or 10, what or (n .. " entries on " .. stream))
end

local function wait_pel_empty(srv, stream, group)
  helper.wait_until(function()
    local ids = srv:pending_ids(stream or "payments", group or "ledger")
    return #ids == 0, #ids .. " pending: " .. table.concat(ids, " ", 1, math.min(#ids, 10))
  end, 10, "nothing pending in " .. (group or "ledger"))
end

local function has_field(args, name, value)
  for i = 1, #args - 1 do
    if args[i] == name and (value == nil or args[i + 1] == value) then return true end
  end
  return false
end

-- The decoded `data` field of an XADD's arguments (XADD key * field value ...).
local function xadd_data(args)
  for i = 4, #args - 1, 2 do
    if args[i] == "data" then
      local ok, v = pcall(cjson.decode, args[i + 1])
      return ok and v or nil
    end
  end
end

local function is_cmd(args, name, key)
  return args[1]:upper() == name and (key == nil or args[2] == key)
end

-- The commands of the outcome script call that ran the first command
-- matching pred (MONITOR shows them as client "lua").
local transaction_of = helper.script_block

-- Asserts that the block holds a command for each predicate.
local function assert_block_has(block, preds, what)
  for name, pred in pairs(preds) do
    local found = false
    for _, args in ipairs(block) do
      if pred(args) then found = true end
    end
    assert(found, what .. ": no " .. name .. " in the script call: " .. cjson.encode(block))
  end
end

-- The dead letters on stream, by the id of the entry they stand for.
local function dead_letters_by_origin(srv, stream)
  local out = {}
  for _, e in ipairs(srv:xrange(stream or "payments.dead")) do
    local origin = e.fields["dead-letter-id"]
    assert(origin, "an entry without dead-letter-id: " .. cjson.encode(e.fields))
    assert(out[origin] == nil, "two dead letters for " .. origin)
    out[origin] = e
  end
  return out
end

local function count_keys(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n
end

-- ---- handlers ----------------------------------------------------------------

-- Rejects payments of closed accounts, posts the others.
local REJECTING = [[
local ls = require "luastream"

return {
  stream = "payments", group = "ledger", dead_letter = "payments.dead",
  handle = function(payment, ctx)
    if payment.account == "closed" then
      ls.log.info("rejecting", { payment_id = payment.id, entry_id = ctx.id })
      return ls.reject("account closed")
    end
    ls.log.info("payment posted", { payment_id = payment.id, entry_id = ctx.id })
  end,
}
]]

describe("dead letters", function()
  after_each(helper.cleanup)

  it("dead-letters a rejected entry with its provenance, in one script call with its ack", function()
    local srv = helper.redis_start()
    local monitor = srv:monitor()
    local host = start_host(srv, { ["rejecting.lua"] = REJECTING })
    local before = server_ms(srv)
    local data = helper.payment(1, "closed", 700)
    local id = helper.publish(srv, "payments", data, { key = "closed", headers = { "source=spec" } })
    helper.publish(srv, "payments", helper.payment(2, "acme", 800), { key = "acme" })
    wait_xlen(srv, "payments.dead", 1)
    host:wait_records({ msg = "payment posted" }, 1, 10, "payment 2 posted")
    wait_pel_empty(srv)
    local after = server_ms(srv)
    assert.equal(0, host:stop())
    monitor:stop()

    local dl = srv:xrange("payments.dead")
    assert.equal(1, #dl)
    local f = dl[1].fields
    local expected = {
      data = data, ["partition-key"] = "closed", source = "spec",
      ["dead-letter-stream"] = "payments", ["dead-letter-group"] = "ledger",
      ["dead-letter-id"] = id, ["dead-letter-deliveries"] = "1",
      ["dead-letter-handler"] = "rejecting.lua", ["dead-letter-reason"] = "rejected",
      ["dead-letter-error"] = "account closed",
    }
    for name, value in pairs(expected) do
      assert.equal(value, f[name], "field " .. name .. " of the dead letter")
    end
    local t = tonumber(f["dead-letter-time"])
    assert.is_true(t ~= nil and t >= before - 5 and t <= after + 5,
      string.format("dead-letter-time %s outside [%d, %d]", tostring(f["dead-letter-time"]), before, after))
    assert.equal(2, srv:xlen("payments"), "the original stays on its stream; nothing else added")

    local block, why = transaction_of(monitor:commands(), function(args)
      return is_cmd(args, "XADD", "payments.dead") and has_field(args, "dead-letter-id", id)
    end)
    assert(block, why)
    assert_block_has(block, {
      ["XACK of the original"] = function(args) return is_cmd(args, "XACK", "payments") and args[3] == "ledger" and args[4] == id end,
    }, "dead letter of " .. id)

    local rec = host:records(DEAD_LETTERED)
    assert.equal(1, #rec)
    assert.equal("warn", rec[1].level)
    assert.equal(id, rec[1].id)
    assert.equal("rejected", rec[1].reason)
    assert.equal("payments.dead", rec[1].dead_letter)
  end)

  it("dead-letters bad input without calling the handler: decode-error, too-large, no-fields", function()
    local srv = helper.redis_start()
    local host = start_host(srv, {
      ["strict.lua"] = [[
local ls = require "luastream"
return {
  stream = "payments", group = "ledger", dead_letter = "payments.dead", max_body = 64,
  handle = function(payment, ctx)
    ls.log.info("handled", { entry_id = ctx.id })
  end,
}
]],
    })
    local ids = {
      ["decode-error"] = srv:cli("XADD", "payments", "*", "data", "{not json", "partition-key", "acme"),
      ["too-large"] = srv:cli("XADD", "payments", "*", "data", '"' .. string.rep("x", 100) .. '"'),
      ["no-fields"] = srv:cli("XADD", "payments", "*", "partition-key", "acme"),
    }
    local good = srv:cli("XADD", "payments", "*", "data", '{"id":4}')
    wait_xlen(srv, "payments.dead", 3)
    host:wait_records({ msg = "handled" }, 1, 10, "the good entry handled")
    wait_pel_empty(srv)

    local dls = dead_letters_by_origin(srv)
    assert.equal(3, count_keys(dls))
    local errors = { ["decode-error"] = "not valid JSON", ["too-large"] = "max_body", ["no-fields"] = "no data field" }
    for reason, id in pairs(ids) do
      local f = assert(dls[id], "no dead letter for the " .. reason .. " entry").fields
      assert.equal(reason, f["dead-letter-reason"])
      assert.equal("1", f["dead-letter-deliveries"])
      assert.matches(errors[reason], f["dead-letter-error"], 1, true)
      assert.equal(1, host:count({ msg = "entry dead-lettered", id = id, reason = reason, level = "warn" }), reason .. " logged")
    end
    assert.equal("{not json", dls[ids["decode-error"]].fields.data, "the body travels unchanged")
    local handled = host:records({ msg = "handled" })
    assert.equal(1, #handled)
    assert.equal(good, handled[1].entry_id)
    assert.equal(0, host:stop())
  end)

  it("caps retries on a new subscription: the last delivery max_deliveries allows is dead-lettered", function()
    local srv = helper.redis_start()
    local host = start_host(srv, {
      ["always_retry.lua"] = [[
local ls = require "luastream"
return {
  stream = "payments", group = "ledger", dead_letter = "payments.dead", max_deliveries = 3,
  handle = function(payment, ctx)
    ls.log.info("attempt", { payment_id = payment.id, entry_id = ctx.id,
      delivery_count = ctx.headers[ls.DELIVERY_COUNT_HEADER] or "none" })
    return ls.retry()
  end,
}
]],
    })
    local id = helper.publish(srv, "payments", helper.payment(1, "acme"), { key = "acme" })
    wait_xlen(srv, "payments.dead", 1)
    wait_pel_empty(srv)

    local attempts = host:records({ msg = "attempt" })
    assert.equal(3, #attempts, "deliveries before the cap")
    assert.same({ "none", "1", "2" }, { attempts[1].delivery_count, attempts[2].delivery_count, attempts[3].delivery_count })
    assert.equal(id, attempts[1].entry_id)
    local f = srv:xrange("payments.dead")[1].fields
    assert.equal("max-deliveries", f["dead-letter-reason"])
    assert.equal("3", f["dead-letter-deliveries"])
    assert.equal(id, f["dead-letter-id"], "the dead letter names the id on the source stream")
    assert.equal("payments", f["dead-letter-stream"])
    assert.equal(id, f["original-id"], "the copy's original-id travels with it")
    assert.matches("3 of 3", f["dead-letter-error"], 1, true)
    assert.equal(1, srv:xlen("payments"), "the original only")
    assert.equal(2, srv:call("XINFO", "STREAM", "payments:retry:ledger")["entries-added"],
      "two copies went through the retry stream")
    assert.equal(0, host:stop())
  end)

  it("caps handler errors on a claiming read: the error of the last allowed delivery is dead-lettered", function()
    local srv = helper.redis_start()
    local host = start_host(srv, {
      ["failing.lua"] = [[
local ls = require "luastream"
return {
  stream = "payments", group = "ledger", read = "claiming", claim_fallback = true, min_idle = 200,
  dead_letter = "payments.dead", max_deliveries = 2,
  handle = function(payment, ctx)
    ls.log.info("attempt", { entry_id = ctx.id, delivery_count = ctx.headers[ls.DELIVERY_COUNT_HEADER] })
    error("ledger unavailable")
  end,
}
]],
    })
    local id = helper.publish(srv, "payments", helper.payment(1, "acme"))
    wait_xlen(srv, "payments.dead", 1)
    wait_pel_empty(srv)
    local attempts = host:records({ msg = "attempt" })
    assert.equal(2, #attempts)
    assert.same({ "0", "1" }, { attempts[1].delivery_count, attempts[2].delivery_count })
    local f = srv:xrange("payments.dead")[1].fields
    assert.equal("handler-error", f["dead-letter-reason"])
    assert.equal(id, f["dead-letter-id"])
    assert.equal("2", f["dead-letter-deliveries"])
    assert.matches("ledger unavailable", f["dead-letter-error"], 1, true)
    assert.equal(1, srv:xlen("payments"), "a claiming read appends no copy")
    assert.equal(0, host:stop())
  end)

  it("counts crashes: an entry whose handler kills the host each time is dead-lettered at the cap", function()
    local srv = helper.redis_start()
    local files = {
      ["crashing.lua"] = [[
local ls = require "luastream"
local ffi = require "ffi"
pcall(ffi.cdef, "int kill(int pid, int sig); int getpid(void);")
return {
  stream = "payments", group = "ledger", read = "claiming", claim_fallback = true, min_idle = 200,
  dead_letter = "payments.dead", max_deliveries = 3,
  handle = function(payment, ctx)
    ls.log.warn("crashing", { entry_id = ctx.id, delivery_count = ctx.headers[ls.DELIVERY_COUNT_HEADER] })
    ffi.C.kill(ffi.C.getpid(), 9)
  end,
}
]],
    }
    local id
    local counts = {}
    for round = 1, 3 do
      local h = start_host(srv, files)
      if round == 1 then id = helper.publish(srv, "payments", helper.payment(1, "acme")) end
      assert.equal(128 + 9, h:wait_exit(10), "host " .. round .. " killed by its handler")
      local rec = h:records({ msg = "crashing" })
      assert.equal(1, #rec, "host " .. round .. " ran the entry once")
      assert.equal(id, rec[1].entry_id)
      counts[round] = rec[1].delivery_count
    end
    assert.same({ "0", "1", "2" }, counts)
    assert.equal(0, srv:xlen("payments.dead"))

    local last = start_host(srv, files)
    wait_xlen(srv, "payments.dead", 1, 10, "the dead letter after the third crash")
    wait_pel_empty(srv)
    assert.equal(0, last:count({ msg = "crashing" }), "the handler ran a fourth time")
    local f = srv:xrange("payments.dead")[1].fields
    assert.equal("max-deliveries", f["dead-letter-reason"])
    assert.equal(id, f["dead-letter-id"])
    assert.equal("3", f["dead-letter-deliveries"])
    assert.equal(0, last:stop())
  end)

  it("counts crashes on `new`: the same consumer name reads its own pending entry again, and dead-letters it at the cap", function()
    -- A `new` subscription never claims: the host started again under the
    -- same name reads its own pending list first; Redis counts each of those
    -- reads as a delivery.
    local srv = helper.redis_start()
    local files = {
      ["crashing.lua"] = [[
local ls = require "luastream"
local ffi = require "ffi"
pcall(ffi.cdef, "int kill(int pid, int sig); int getpid(void);")
return {
  stream = "payments", group = "ledger", read = "new",
  dead_letter = "payments.dead", max_deliveries = 3,
  handle = function(payment, ctx)
    ls.log.warn("crashing", { entry_id = ctx.id, delivery_count = ctx.headers[ls.DELIVERY_COUNT_HEADER] })
    ffi.C.kill(ffi.C.getpid(), 9)
  end,
}
]],
    }
    local id
    local counts, consumers = {}, {}
    for round = 1, 3 do
      local h = start_host(srv, files)
      if round == 1 then id = helper.publish(srv, "payments", helper.payment(1, "acme")) end
      assert.equal(128 + 9, h:wait_exit(10), "host " .. round .. " killed by its handler")
      local rec = h:records({ msg = "crashing" })
      assert.equal(1, #rec, "host " .. round .. " ran the entry once")
      assert.equal(id, rec[1].entry_id)
      counts[round] = rec[1].delivery_count or "none"
      local pending = srv:call("XPENDING", "payments", "ledger", "-", "+", 10)
      assert.equal(1, #pending)
      assert.equal(round, tonumber(pending[1][4]), "Redis counts every delivery")
      consumers[round] = pending[1][2]
    end
    assert.same({ "none", "1", "2" }, counts, "deliveries before this one, on a history read")
    assert.same({ consumers[1], consumers[1], consumers[1] }, consumers, "one consumer name across the restarts")
    assert.equal(0, srv:xlen("payments.dead"))

    local last = start_host(srv, files)
    wait_xlen(srv, "payments.dead", 1, 10, "the dead letter after the third crash")
    wait_pel_empty(srv)
    assert.equal(0, last:count({ msg = "crashing" }), "the handler ran a fourth time")
    local f = srv:xrange("payments.dead")[1].fields
    assert.equal("max-deliveries", f["dead-letter-reason"])
    assert.equal(id, f["dead-letter-id"])
    assert.equal("3", f["dead-letter-deliveries"])
    assert.equal(0, last:stop())
  end)

  it("without dead_letter: a rejected entry is logged at error level and acked; bad input and the cap leave entries pending", function()
    local srv = helper.redis_start()
    local host = start_host(srv, {
      ["no_dlq.lua"] = [[
local ls = require "luastream"
return {
  stream = "payments", group = "ledger", max_deliveries = 2,
  handle = function(payment, ctx)
    if payment.account == "flaky" then
      ls.log.info("attempt", { entry_id = ctx.id })
      return ls.retry()
    end
    return ls.reject("account closed")
  end,
}
]],
    })
    local rejected = helper.publish(srv, "payments", helper.payment(1, "closed"))
    local bad = srv:cli("XADD", "payments", "*", "data", "{not json")
    helper.publish(srv, "payments", helper.payment(2, "flaky"))
    local r = host:wait_records({ msg = "entry rejected, acked (no dead_letter stream)" }, 1, 10, "the rejection logged")[1]
    local b = host:wait_records({ msg = "bad entry left pending" }, 1, 10, "the bad entry logged")[1]
    local c = host:wait_records({ msg = "delivery limit reached, entry left pending (no dead_letter stream)" }, 1, 10,
      "the cap logged")[1]
    local attempts = host:records({ msg = "attempt" })
    assert.equal(2, #attempts)
    assert.equal("error", c.level)
    assert.equal(attempts[2].entry_id, c.id, "the last copy is left pending")
    assert.equal("max-deliveries", c.reason)
    assert.equal("2", c.deliveries)
    assert.equal("error", r.level)
    assert.equal(rejected, r.id)
    assert.equal("rejected", r.reason)
    assert.equal("account closed", r.error)
    assert.equal("error", b.level)
    assert.equal(bad, b.id)
    assert.equal("decode-error", b.reason)
    helper.wait_until(function()
      local ids = srv:pending_ids("payments", "ledger")
      local copies = srv:pending_ids("payments:retry:ledger", "ledger")
      return #ids == 1 and ids[1] == bad and #copies == 1 and copies[1] == c.id,
        cjson.encode(ids) .. " " .. cjson.encode(copies)
    end, 10, "the bad entry and the last copy (on the retry stream) pending, nothing else")
    assert.equal("", srv:cli("KEYS", "*dead*"), "a dead-letter stream appeared")
    assert.equal(0, host:stop())
  end)
end)

describe("retry_after", function()
  after_each(helper.cleanup)

  it("on new: the entry waits in the delay set, acked, and comes back after the delay with delivery-count 1", function()
    local srv = helper.redis_start()
    local host = start_host(srv, {
      ["deferring.lua"] = [[
local ls = require "luastream"
return {
  stream = "payments", group = "ledger",
  handle = function(payment, ctx)
    local count = ctx.headers[ls.DELIVERY_COUNT_HEADER]
    if count == nil then
      ls.log.info("deferred", { payment_id = payment.id, entry_id = ctx.id })
      return ls.retry_after(300)
    end
    ls.log.info("back", { payment_id = payment.id, entry_id = ctx.id, delivery_count = count,
      original_id = ctx.headers[ls.ORIGINAL_ID_HEADER] })
  end,
}
]],
    })
    local id = helper.publish(srv, "payments", helper.payment(1, "acme"), { key = "acme" })
    local deferred = host:wait_records({ msg = "deferred" }, 1, 10, "the first delivery")[1]
    -- while it waits: in the delay set, and acked in the same transaction
    local seen_waiting = false
    helper.wait_until(function()
      if host:count({ msg = "back" }) > 0 then return true end
      local n = tonumber(srv:cli("ZCARD", "payments:delayed:ledger"))
      if n == 1 then
        local _, set = srv:pending_ids("payments", "ledger")
        assert.is_nil(set[id], "the delayed entry is still pending")
        seen_waiting = true
      end
      return seen_waiting, "ZCARD " .. n
    end, 10, "the entry in the delay set")
    local back = host:wait_records({ msg = "back" }, 1, 10, "the entry back")[1]
    assert.is_true(seen_waiting, "never saw the entry in the delay set")
    local gap = helper.parse_time(back.time) - helper.parse_time(deferred.time)
    assert.is_true(gap >= 0.3 - 0.01, string.format("back %.3f s after retry_after(300)", gap))
    assert.is_true(gap <= 0.3 + 2, string.format("back %.3f s after retry_after(300)", gap))
    assert.equal("1", back.delivery_count)
    assert.equal(id, back.original_id)
    wait_pel_empty(srv)
    assert.equal("0", srv:cli("EXISTS", "payments:delayed:ledger"), "the delay set is not empty")
    assert.equal(1, srv:xlen("payments"), "never back on the shared stream")
    local info = srv:call("XINFO", "STREAM", "payments:retry:ledger")
    assert.equal(1, info["entries-added"], "back on the group's retry stream, once")
    assert.equal(back.entry_id, info["last-generated-id"])
    assert.equal(0, host:stop())
  end)

  it("an unreadable member of the delay set moves aside and holds up none due after it", function()
    local srv = helper.redis_start()
    -- due long ago: an id with no field (not what luastream writes), then a
    -- readable member for the group
    local body = '{"id":7}'
    local good = "3:9-14:data" .. #body .. ":" .. body .. "11:retry-group6:ledger"
    srv:cli("ZADD", "payments:delayed:ledger", "1", "3:9-0", "2", good)
    local host = start_host(srv, {
      ["sweeping.lua"] = [[
local ls = require "luastream"
return {
  stream = "payments", group = "ledger",
  handle = function(payment) ls.log.info("got", { payment_id = payment.id }) end,
}
]],
    })
    local got = host:wait_records({ msg = "got" }, 1, 10, "the readable member back on the stream")[1]
    assert.equal("7", got.payment_id)
    local moved = host:wait_records({ msg = "unreadable members of the delay set moved aside, not delivered" },
      1, 10, "the unreadable member reported")[1]
    assert.equal("error", moved.level)
    assert.equal("1", moved.members)
    assert.equal("payments:delayed:ledger:unreadable", moved.moved_to)
    assert.same({ { "3:9-0", 1 } },
      srv:call("ZRANGE", "payments:delayed:ledger:unreadable", "0", "-1", "WITHSCORES"))
    assert.equal("0", srv:cli("EXISTS", "payments:delayed:ledger"))
    assert.equal(0, host:stop())
  end)

  it("on claiming within min_idle: the entry stays pending under its id and comes back after the delay", function()
    local srv = helper.redis_start()
    local host = start_host(srv, {
      ["waiting.lua"] = [[
local ls = require "luastream"
local seen = {}
return {
  stream = "payments", group = "ledger", read = "claiming", claim_fallback = true, min_idle = "3s",
  handle = function(payment, ctx)
    if not seen[ctx.id] then
      seen[ctx.id] = true
      ls.log.info("deferred", { entry_id = ctx.id })
      return ls.retry_after(400)
    end
    ls.log.info("back", { entry_id = ctx.id, delivery_count = ctx.headers[ls.DELIVERY_COUNT_HEADER] })
  end,
}
]],
    })
    local id = helper.publish(srv, "payments", helper.payment(1, "acme"))
    local deferred = host:wait_records({ msg = "deferred" }, 1, 10, "the first delivery")[1]
    local _, set = srv:pending_ids("payments", "ledger")
    assert.is_truthy(set[id], "the entry is not pending while it waits")
    local back = host:wait_records({ msg = "back" }, 1, 10, "the entry back")[1]
    local gap = helper.parse_time(back.time) - helper.parse_time(deferred.time)
    assert.is_true(gap >= 0.4 - 0.01, string.format("back %.3f s after retry_after(400)", gap))
    assert.is_true(gap <= 0.4 + 1.5, string.format("back %.3f s after retry_after(400), min_idle is 3 s", gap))
    assert.equal(id, back.entry_id)
    assert.equal("1", back.delivery_count)
    wait_pel_empty(srv)
    assert.equal(1, srv:xlen("payments"), "a copy was appended")
    assert.equal("0", srv:cli("EXISTS", "payments:delayed:ledger"))
    assert.equal(0, host:stop())
  end)

  it("two hosts sweeping one delay set move each entry back exactly once", function()
    local srv = helper.redis_start()
    local files = {
      ["deferring.lua"] = [[
local ls = require "luastream"
return {
  stream = "payments", group = "ledger", workers = 4,
  handle = function(payment, ctx)
    if ctx.headers[ls.DELIVERY_COUNT_HEADER] == nil then return ls.retry_after(200) end
    ls.log.info("back", { payment_id = payment.id })
  end,
}
]],
    }
    local a = start_host(srv, files, { "--consumer", "host-a" })
    local b = start_host(srv, files, { "--consumer", "host-b" })
    local N = 60
    srv:pipe(helper.payment_commands(1, N, 6))
    helper.wait_until(function()
      local n = a:count({ msg = "back" }) + b:count({ msg = "back" })
      return n >= N and srv:cli("EXISTS", "payments:delayed:ledger") == "0", n .. " back"
    end, 15, "every payment back and the delay set empty")
    wait_pel_empty(srv)
    -- with the set empty nothing more can be moved: every move has happened
    local backs = {}
    for _, h in ipairs { a, b } do
      for _, rec in ipairs(h:records({ msg = "back" })) do
        local id = tonumber(rec.payment_id)
        backs[id] = (backs[id] or 0) + 1
      end
    end
    for id = 1, N do assert.equal(1, backs[id], "deliveries after the delay of payment " .. id) end
    assert.equal(N, srv:call("XINFO", "STREAM", "payments:retry:ledger")["entries-added"],
      "entries moved back more than once")
    assert.equal(0, a:stop())
    assert.equal(0, b:stop())
  end)
end)

describe("outcomes written with their ack", function()
  after_each(helper.cleanup)

  it("writes a reply and the ack of its entry in one script call", function()
    local srv = helper.redis_start()
    local monitor = srv:monitor()
    local host = start_host(srv, {
      ["screen.lua"] = [[
local ls = require "luastream"
return {
  stream = "payments", group = "fraud", reply_to = "payments.screened",
  handle = function(payment)
    return ls.reply({ payment_id = payment.id, suspicious = false })
  end,
}
]],
    })
    local ids = {}
    for i = 1, 3 do ids[i] = helper.publish(srv, "payments", helper.payment(i, "acme")) end
    wait_xlen(srv, "payments.screened", 3)
    wait_pel_empty(srv, "payments", "fraud")
    assert.equal(0, host:stop())
    monitor:stop()
    local commands = monitor:commands()
    for _, id in ipairs(ids) do
      local block, why = transaction_of(commands, function(args)
        return is_cmd(args, "XADD", "payments.screened") and has_field(args, "original-id", id)
      end)
      assert(block, why)
      assert_block_has(block, {
        ["XACK"] = function(args) return is_cmd(args, "XACK", "payments") and args[3] == "fraud" and args[4] == id end,
      }, "reply to " .. id)
    end
  end)

  it("writes ctx:publish entries with the ack, and none when the handler raises", function()
    local srv = helper.redis_start()
    local monitor = srv:monitor()
    local host = start_host(srv, {
      ["audited.lua"] = [[
local ls = require "luastream"
return {
  stream = "payments", group = "ledger",
  handle = function(payment, ctx)
    ctx:publish("audit", { payment_id = payment.id, step = "seen" }, { key = payment.account })
    ctx:publish("ledger.entries", { payment_id = payment.id })
    if payment.account == "broken" then error("posting failed") end
    if payment.account == "retry" and not ctx.headers[ls.DELIVERY_COUNT_HEADER] then return ls.retry() end
    ls.log.info("payment posted", { payment_id = payment.id })
  end,
}
]],
    })
    local ok = helper.publish(srv, "payments", helper.payment(1, "acme"), { key = "acme" })
    local broken = helper.publish(srv, "payments", helper.payment(2, "broken"))
    helper.publish(srv, "payments", helper.payment(3, "retry"))
    host:wait_records({ msg = "payment posted" }, 2, 10, "payments 1 and 3 posted")
    host:wait_records({ msg = "handler failed, entry left pending" }, 1, 10, "payment 2 failed")
    helper.wait_until(function()
      local ids = srv:pending_ids("payments", "ledger")
      return #ids == 1 and ids[1] == broken, cjson.encode(ids)
    end, 10, "only the failed payment pending")
    assert.equal(0, host:stop())
    monitor:stop()

    local audited = {}
    for _, e in ipairs(srv:xrange("audit")) do
      local p = cjson.decode(e.fields.data).payment_id
      audited[p] = (audited[p] or 0) + 1
    end
    -- 2 raised: nothing; 3 retried once: only the delivery that acked
    assert.same({ [1] = 1, [3] = 1 }, audited)
    assert.equal(2, srv:xlen("ledger.entries"))
    assert.equal("acme", srv:xrange("audit")[1].fields["partition-key"])

    local block, why = transaction_of(monitor:commands(), function(args)
      local body = is_cmd(args, "XADD", "audit") and xadd_data(args)
      return body and body.payment_id == 1
    end)
    assert(block, why)
    assert_block_has(block, {
      ["XADD ledger.entries"] = function(args) return is_cmd(args, "XADD", "ledger.entries") end,
      ["XACK"] = function(args) return is_cmd(args, "XACK", "payments") and args[4] == ok end,
    }, "payment 1")
  end)
end)

-- ---- the CLI -----------------------------------------------------------------

-- `luastream dead-letters list` output as blocks: {id =, lines = {label = value}, headers = {name = value}}.
local function parse_list(out)
  local blocks, cur = {}, nil
  for line in out:gmatch("[^\n]+") do
    local id = line:match("^dead letter (%S+)$")
    if id then
      cur = { id = id, lines = {}, headers = {} }
      blocks[#blocks + 1] = cur
    elseif cur and line:find("^  ") then
      local label, value = line:match("^  (%S.-)%s%s+(.*)$")
      if label == "header" then
        local name, v = value:match("^([^:]+): (.*)$")
        cur.headers[name] = v
      elseif label then
        cur.lines[label] = value
      end
    end
  end
  return blocks
end

local function iso_utc(ms)
  ms = tonumber(ms)
  return os.date("!%Y-%m-%dT%H:%M:%S", math.floor(ms / 1000)) .. string.format(".%03dZ", ms % 1000)
end

-- Rejects each payment the first time this host sees it, posts it the next.
local REJECT_ONCE = [[
local ls = require "luastream"
local seen = {}
return {
  stream = "payments", group = "ledger", dead_letter = "payments.dead",
  handle = function(payment, ctx)
    if not seen[payment.id] then
      seen[payment.id] = true
      ls.log.info("payment rejected", { payment_id = payment.id, key = ctx.idempotency_key })
      return ls.reject("account under review")
    end
    ls.log.info("payment posted", { payment_id = payment.id, entry_id = ctx.id,
      delivery_count = ctx.headers[ls.DELIVERY_COUNT_HEADER] or "none",
      original_id = ctx.headers[ls.ORIGINAL_ID_HEADER] or "none", key = ctx.idempotency_key })
  end,
}
]]

local SCREEN = [[
local ls = require "luastream"
return {
  stream = "payments", group = "fraud",
  handle = function(payment, ctx)
    ls.log.info("payment screened", { payment_id = payment.id, entry_id = ctx.id })
  end,
}
]]

describe("luastream dead-letters", function()
  after_each(helper.cleanup)

  it("--help describes list, replay and delete", function()
    local code, out = helper.luastream("dead-letters", "--help")
    assert.equal(0, code)
    assert.matches("dead-letters list", out, 1, true)
    assert.matches("dead-letters replay", out, 1, true)
    code, out = helper.luastream("dead-letters", "list", "--help")
    assert.equal(0, code)
    for _, opt in ipairs { "--redis", "--count" } do assert.matches(opt, out, 1, true) end
    code, out = helper.luastream("dead-letters", "replay", "--help")
    assert.equal(0, code)
    for _, opt in ipairs { "--redis", "--id", "--all", "DIR STREAM", "--load-timeout" } do
      assert.matches(opt, out, 1, true)
    end
    code, out = helper.luastream("dead-letters", "delete", "--help")
    assert.equal(0, code)
    for _, opt in ipairs { "--redis", "--id", "--all", "--reason", "--yes" } do assert.matches(opt, out, 1, true) end
    code, out = helper.luastream("dead-letters", "--help")
    assert.equal(0, code)
    assert.matches("dead-letters delete", out, 1, true)
    code, out = helper.luastream("--help")
    assert.equal(0, code)
    assert.matches("dead-letters", out, 1, true)
    local _, err
    code, _, err = helper.luastream("dead-letters", "purge", "x")
    assert.equal(2, code)
    assert.matches("purge", err, 1, true)
  end)

  it("list shows each dead letter with its provenance, oldest first", function()
    local srv = helper.redis_start()
    local host = start_host(srv, { ["rejecting.lua"] = REJECTING })
    local first = helper.publish(srv, "payments", helper.payment(1, "closed", 700), { key = "closed", headers = { "source=spec" } })
    local second = srv:cli("XADD", "payments", "*", "data", "{not json")
    wait_xlen(srv, "payments.dead", 2)
    assert.equal(0, host:stop())
    local stored = srv:xrange("payments.dead")

    local code, out, err = helper.luastream("dead-letters", "list", "--redis", srv.url, "payments.dead")
    assert.equal(0, code, err)
    local blocks = parse_list(out)
    assert.equal(2, #blocks, out)
    local b = blocks[1]
    assert.equal(stored[1].id, b.id)
    assert.equal("payments", b.lines.source)
    assert.equal("ledger", b.lines.group)
    assert.equal(first, b.lines["original id"])
    assert.equal("1", b.lines.deliveries)
    assert.equal("rejecting.lua", b.lines.handler)
    assert.equal("rejected", b.lines.reason)
    assert.equal("account closed", b.lines.error)
    assert.equal(iso_utc(stored[1].fields["dead-letter-time"]), b.lines.time)
    assert.equal("closed", b.headers["partition-key"])
    assert.equal("spec", b.headers.source)
    assert.equal(helper.payment(1, "closed", 700), b.lines.data)
    assert.equal(stored[2].id, blocks[2].id)
    assert.equal(second, blocks[2].lines["original id"])
    assert.equal("decode-error", blocks[2].lines.reason)
    assert.equal("{not json", blocks[2].lines.data)
    assert.matches("2 dead letters on payments.dead", out, 1, true)

    code, out = helper.luastream("dead-letters", "list", "--redis", srv.url, "payments.dead", "--count", "1")
    assert.equal(0, code)
    blocks = parse_list(out)
    assert.equal(1, #blocks)
    assert.equal(stored[1].id, blocks[1].id)
    assert.matches("1 of 2 entries on payments.dead shown", out, 1, true)

    local _
    code, _, err = helper.luastream("dead-letters", "list", "--redis", srv.url, "payments.dead", "--count", "0")
    assert.equal(2, code)
    assert.matches("--count", err, 1, true)
  end)

  it("replay puts dead letters on the retry stream of their group only, never on the source, and the host handles them", function()
    local srv = helper.redis_start()
    local host, dir = start_host(srv, { ["post.lua"] = REJECT_ONCE, ["screen.lua"] = SCREEN })
    local ids, data = {}, {}
    for i = 1, 3 do
      data[i] = helper.payment(i, "acme", 100 * i)
      ids[i] = helper.publish(srv, "payments", data[i], { key = "acme", headers = { "trace=t" .. i } })
    end
    wait_xlen(srv, "payments.dead", 3)
    host:wait_records({ msg = "payment screened" }, 3, 10, "the 3 payments screened")
    wait_pel_empty(srv)
    local dls = dead_letters_by_origin(srv)
    local dl2 = dls[ids[2]].id

    -- one entry by id
    local monitor = srv:monitor() -- the replayed entry is trimmed once the host acks it
    local code, out, err = helper.luastream("dead-letters", "replay", "--redis", srv.url, dir, "payments.dead", "--id", dl2)
    assert.equal(0, code, err)
    local new2 = out:match(dl2:gsub("%-", "%%-") .. " %-> payments:retry:ledger (%d+%-%d+)\n")
    assert(new2, "no `" .. dl2 .. " -> payments:retry:ledger NEW-ID` line in:\n" .. out)
    assert.matches("replayed 1 dead letter from payments.dead", out, 1, true)
    assert.equal(2, srv:xlen("payments.dead"))
    assert.same({}, srv:xrange("payments.dead", dl2, dl2))
    assert.equal(3, srv:xlen("payments"), "nothing replayed onto the source stream")
    -- the fields it was added with (the script's XADD, seen by MONITOR)
    local e
    helper.wait_until(function()
      for _, c in ipairs(monitor:commands()) do
        if c.args[1]:upper() == "XADD" and c.args[2] == "payments:retry:ledger" then
          e = { fields = {} }
          for i = 4, #c.args - 1, 2 do e.fields[c.args[i]] = c.args[i + 1] end
        end
      end
      return e ~= nil
    end, 10, "the replay's XADD in MONITOR output")
    monitor:stop()
    assert.equal(data[2], e.fields.data)
    assert.equal("acme", e.fields["partition-key"])
    assert.equal("t2", e.fields.trace)
    assert.is_nil(e.fields["retry-group"])
    assert.equal(ids[2], e.fields["original-id"])
    for name in pairs(e.fields) do
      assert.is_nil(name:match("^dead%-letter%-"), "replayed with " .. name)
    end
    assert.is_nil(e.fields["delivery-count"])
    local posted = host:wait_records({ msg = "payment posted" }, 1, 10, "payment 2 posted after its replay")[1]
    assert.equal("2", posted.payment_id)
    assert.equal(new2, posted.entry_id)
    assert.equal("none", posted.delivery_count, "a replayed entry starts a fresh count")
    -- the idempotency key a handler sends outside is the one of the first delivery
    assert.equal("payments/ledger/" .. ids[2], posted.key)
    assert.equal(posted.key, host:records({ msg = "payment rejected", payment_id = "2" })[1].key)

    -- the rest
    code, out, err = helper.luastream("dead-letters", "replay", "--redis", srv.url, dir, "payments.dead", "--all")
    assert.equal(0, code, err)
    for _, i in ipairs { 1, 3 } do
      local dl = dls[ids[i]].id
      assert.matches(dl .. " -> payments:retry:ledger ", out, 1, true)
    end
    assert.matches("replayed 2 dead letters from payments.dead", out, 1, true)
    assert.equal(0, srv:xlen("payments.dead"))
    host:wait_records({ msg = "payment posted" }, 3, 10, "payments 1 and 3 posted after the replay")
    wait_pel_empty(srv)
    wait_pel_empty(srv, "payments", "fraud")
    -- the fraud group screened each payment once: replays are the ledger's
    local screened = {}
    for _, rec in ipairs(host:records({ msg = "payment screened" })) do
      screened[rec.payment_id] = (screened[rec.payment_id] or 0) + 1
    end
    assert.same({ ["1"] = 1, ["2"] = 1, ["3"] = 1 }, screened)

    code, out = helper.luastream("dead-letters", "replay", "--redis", srv.url, dir, "payments.dead", "--all")
    assert.equal(0, code)
    assert.matches("replayed 0 dead letters from payments.dead", out, 1, true)
    assert.equal(0, host:stop())
  end)

  it("replay refuses unknown ids and entries that are not dead letters, and then moves nothing", function()
    local srv = helper.redis_start()
    local host, dir = start_host(srv, { ["rejecting.lua"] = REJECTING })
    helper.publish(srv, "payments", helper.payment(1, "closed"))
    wait_xlen(srv, "payments.dead", 1)
    assert.equal(0, host:stop())
    local dl = srv:xrange("payments.dead")[1].id
    local junk = srv:cli("XADD", "payments.dead", "*", "note", "hand-written")
    local xlen = srv:xlen("payments")

    local code, out, err = helper.luastream("dead-letters", "replay", "--redis", srv.url, dir, "payments.dead",
      "--id", dl, "--id", "1-0")
    assert.equal(1, code, out)
    assert.matches("1-0", err, 1, true)
    assert.matches("payments.dead", err, 1, true)
    code, out, err = helper.luastream("dead-letters", "replay", "--redis", srv.url, dir, "payments.dead",
      "--id", dl, "--id", junk)
    assert.equal(1, code, out)
    assert.matches(junk, err, 1, true)
    assert.matches("not a dead letter", err, 1, true)
    -- provenance luastream did not write in full: refused by name, too
    local partial = srv:cli("XADD", "payments.dead", "*", "data", "{}", "dead-letter-stream", "payments")
    code, out, err = helper.luastream("dead-letters", "replay", "--redis", srv.url, dir, "payments.dead",
      "--id", partial)
    assert.equal(1, code, out)
    assert.matches(partial, err, 1, true)
    srv:cli("XDEL", "payments.dead", partial)
    -- a stream that is no handler's dead_letter is refused
    code, out, err = helper.luastream("dead-letters", "replay", "--redis", srv.url, dir, "nothing.here", "--all")
    assert.equal(1, code, out)
    assert.matches('no handler of ' .. dir .. ' has dead_letter = "nothing.here"', err, 1, true)
    assert.matches("payments.dead", err, 1, true)
    assert.equal(2, srv:xlen("payments.dead"), "a refused replay moved something")
    assert.equal(xlen, srv:xlen("payments"))

    local _
    code, _, err = helper.luastream("dead-letters", "replay", "--redis", srv.url, dir, "payments.dead")
    assert.equal(2, code)
    assert.matches("--all", err, 1, true)
    code = helper.luastream("dead-letters", "replay", "--redis", srv.url, dir, "payments.dead", "--all", "--id", dl)
    assert.equal(2, code)
    code, _, err = helper.luastream("dead-letters", "replay", "--redis", srv.url, dir, "payments.dead", "--id", "abc")
    assert.equal(2, code)
    assert.matches("abc", err, 1, true)

    -- --all moves the dead letter and leaves the hand-written entry, saying so (exit 1)
    code, out, err = helper.luastream("dead-letters", "replay", "--redis", srv.url, dir, "payments.dead", "--all")
    assert.equal(1, code, err)
    assert.matches(dl .. " -> payments:retry:ledger ", out, 1, true)
    assert.matches("replayed 1 dead letter from payments.dead (1 entry skipped", out, 1, true)
    assert.matches(junk, err, 1, true)
    local left = srv:xrange("payments.dead")
    assert.equal(1, #left)
    assert.equal(junk, left[1].id)
  end)

  it("replay takes the handler directory: only its handlers' dead_letter streams, streams, groups and retry streams", function()
    local srv = helper.redis_start()
    local host, dir = start_host(srv, { ["rejecting.lua"] = REJECTING, ["screen.lua"] = SCREEN })
    local real = helper.publish(srv, "payments", helper.payment(1, "closed"))
    wait_xlen(srv, "payments.dead", 1)
    assert.equal(0, host:stop())
    local dl = srv:xrange("payments.dead")[1].id
    -- forged entries, as whoever can write to a stream could add them
    local function forge(stream, fields)
      local args = { "XADD", stream, "*", "data", '{"id":99}' }
      for _, f in ipairs(fields) do args[#args + 1] = f end
      return srv:cli(unpack(args))
    end
    forge("forged.dead", { "dead-letter-stream", "victim", "dead-letter-group", "billing",
      "dead-letter-id", "1-0" })
    local victim = forge("payments.dead", { "dead-letter-stream", "victim", "dead-letter-group", "billing",
      "dead-letter-id", "1-0" })
    local fraud = forge("payments.dead", { "dead-letter-stream", "payments", "dead-letter-group", "fraud",
      "dead-letter-id", real })
    local bad_id = forge("payments.dead", { "dead-letter-stream", "payments", "dead-letter-group", "ledger",
      "dead-letter-id", "chosen-key" })
    local function nothing_moved()
      assert.equal(0, srv:xlen("victim:retry:billing"))
      assert.equal(0, srv:xlen("payments:retry:fraud"))
      assert.equal(0, srv:xlen("payments:retry:ledger"))
      assert.equal(4, srv:xlen("payments.dead"))
      assert.equal(1, srv:xlen("forged.dead"))
    end

    -- a stream that is no handler's dead_letter
    local code, out, err = helper.luastream("dead-letters", "replay", "--redis", srv.url, dir, "forged.dead", "--all")
    assert.equal(1, code, out .. err)
    assert.matches('no handler of ' .. dir .. ' has dead_letter = "forged.dead"', err, 1, true)
    assert.matches("their dead_letter streams: payments.dead", err, 1, true)
    nothing_moved()
    -- on the handler's dead_letter stream: each field that does not match, named with what was expected
    local refusals = {
      { victim, 'dead-letter-stream is "victim", expected payments', true },
      { fraud, 'dead-letter-group is "fraud", expected ledger (for dead-letter-stream payments)', true },
      { bad_id, 'dead-letter-id is "chosen-key", expected an entry id' },
    }
    for _, r in ipairs(refusals) do
      code, out, err = helper.luastream("dead-letters", "replay", "--redis", srv.url, dir, "payments.dead",
        "--id", dl, "--id", r[1])
      assert.equal(1, code, out .. err)
      assert.matches("entry " .. r[1] .. " on payments.dead: " .. r[2], err, 1, true)
      if r[3] then -- what DIR allows, after a stream or group it does not
        assert.matches("the handlers of " .. dir .. ' with dead_letter = "payments.dead": stream payments group ledger (rejecting.lua)', err, 1, true)
      end
      nothing_moved()
    end
    -- --all: the dead letter goes back to its group; the others stay, each named, and the exit is 1
    code, out, err = helper.luastream("dead-letters", "replay", "--redis", srv.url, dir, "payments.dead", "--all")
    assert.equal(1, code, out .. err)
    assert.matches(dl .. " -> payments:retry:ledger ", out, 1, true)
    assert.matches("replayed 1 dead letter from payments.dead (3 entries skipped", out, 1, true)
    for _, r in ipairs(refusals) do assert.matches("skipped: entry " .. r[1] .. " on payments.dead: " .. r[2], err, 1, true) end
    assert.equal(1, srv:xlen("payments:retry:ledger"))
    assert.equal(0, srv:xlen("victim:retry:billing"))
    assert.equal(0, srv:xlen("payments:retry:fraud"))
    assert.equal(3, srv:xlen("payments.dead"))
    -- a directory whose files do not load is not a basis for anything
    local broken = helper.handlers_dir({ ["broken.lua"] = "return {" })
    code, out, err = helper.luastream("dead-letters", "replay", "--redis", srv.url, broken, "payments.dead", "--all")
    assert.equal(1, code, out .. err)
    assert.matches("handler file with problems", err, 1, true)
    -- DIR is required
    code, out, err = helper.luastream("dead-letters", "replay", "--redis", srv.url, "payments.dead", "--all")
    assert.equal(2, code, out .. err)
  end)

  it("replay on partitions: each partition's letters go back to their own partition only", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["parts.lua"] = [[
local ls = require "luastream"
return {
  stream = "orders", group = "ship", partitions = 4, dead_letter = "orders.dead",
  handle = function(order) return ls.reject("no") end,
}
]] })
    local ok = srv:cli("XADD", "orders.dead:{1}", "*", "data", "{}", "dead-letter-stream", "orders:{1}",
      "dead-letter-group", "ship", "dead-letter-id", "5-0")
    local other = srv:cli("XADD", "orders.dead:{1}", "*", "data", "{}", "dead-letter-stream", "orders:{2}",
      "dead-letter-group", "ship", "dead-letter-id", "6-0")
    local code, out, err = helper.luastream("dead-letters", "replay", "--redis", srv.url, dir, "orders.dead:{1}", "--all")
    assert.equal(1, code, out .. err)
    assert.matches(ok .. " -> orders:{1}:retry:ship ", out, 1, true)
    assert.matches("entry " .. other .. ' on orders.dead:{1}: dead-letter-stream is "orders:{2}", expected orders:{1}', err, 1, true)
    assert.equal(0, srv:xlen("orders:{2}:retry:ship"))
    code, out, err = helper.luastream("dead-letters", "replay", "--redis", srv.url, dir, "orders.dead", "--all")
    assert.equal(1, code, out .. err)
    assert.matches("orders.dead:{0}", err, 1, true) -- the names it would take
  end)

  it("list and replay on a stream without dead-letter provenance say so and exit 1; an empty or missing one is 0 dead letters", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["rejecting.lua"] = REJECTING })
    for i = 1, 3 do helper.publish(srv, "payments", helper.payment(i, "acme")) end
    -- a source stream given by mistake
    local code, out, err = helper.luastream("dead-letters", "list", "--redis", srv.url, "payments")
    assert.equal(1, code, out .. err)
    assert.matches("payments on " .. srv.url .. " is not a dead-letter stream: none of its 3 entries carries dead-letter provenance", err, 1, true)
    assert.equal("", out)
    code, out, err = helper.luastream("dead-letters", "list", "--redis", srv.url, "payments", "--count", "2")
    assert.equal(1, code, out .. err)
    assert.matches("none of its first 2 entries (of 3) carries", err, 1, true)
    code, out, err = helper.luastream("dead-letters", "replay", "--redis", srv.url, dir, "payments", "--all")
    assert.equal(1, code, out .. err)
    assert.matches('has dead_letter = "payments"', err, 1, true)
    assert.equal(0, srv:xlen("payments:retry:ledger"))
    -- missing: 0, exit 0
    code, out, err = helper.luastream("dead-letters", "list", "--redis", srv.url, "payments.dead")
    assert.equal(0, code, out .. err)
    assert.matches("0 dead letters on payments.dead (no such stream", out, 1, true)
    code, out, err = helper.luastream("dead-letters", "replay", "--redis", srv.url, dir, "payments.dead", "--all")
    assert.equal(0, code, out .. err)
    assert.matches("replayed 0 dead letters from payments.dead", out, 1, true)
    -- empty: 0, exit 0
    srv:cli("XGROUP", "CREATE", "payments.dead", "g", "$", "MKSTREAM")
    code, out, err = helper.luastream("dead-letters", "list", "--redis", srv.url, "payments.dead")
    assert.equal(0, code, out .. err)
    assert.matches("0 dead letters on payments.dead\n", out, 1, true)
    code, out, err = helper.luastream("dead-letters", "replay", "--redis", srv.url, dir, "payments.dead", "--all")
    assert.equal(0, code, out .. err)
    assert.matches("replayed 0 dead letters from payments.dead", out, 1, true)
    -- the handler's dead_letter holding only entries someone else added
    for i = 1, 2 do srv:cli("XADD", "payments.dead", "*", "data", '{"id":' .. i .. '}') end
    code, out, err = helper.luastream("dead-letters", "replay", "--redis", srv.url, dir, "payments.dead", "--all")
    assert.equal(1, code, out .. err)
    assert.matches("none of the 2 entries on payments.dead could be replayed", err, 1, true)
    code, out, err = helper.luastream("dead-letters", "list", "--redis", srv.url, "payments.dead")
    assert.equal(1, code, out .. err)
    assert.matches("is not a dead-letter stream", err, 1, true)
    assert.equal(2, srv:xlen("payments.dead"))
    -- with a dead letter among them: listed, the others marked and not counted as dead letters
    srv:cli("XADD", "payments.dead", "*", "data", "{}", "dead-letter-stream", "payments", "dead-letter-group", "ledger",
      "dead-letter-id", "1-0")
    code, out, err = helper.luastream("dead-letters", "list", "--redis", srv.url, "payments.dead")
    assert.equal(0, code, out .. err)
    assert.matches("(no dead-letter-stream field: not a dead letter luastream wrote)", out, 1, true)
    assert.matches("3 entries on payments.dead, 1 of them dead letter\n", out, 1, true)
  end)

  it("delete: by id, by reason, --all; says what it would delete without --yes; never entries that are not dead letters", function()
    local srv = helper.redis_start()
    local function letter(reason, n)
      return srv:cli("XADD", "payments.dead", "*", "data", '{"n":' .. n .. '}', "dead-letter-stream", "payments",
        "dead-letter-group", "ledger", "dead-letter-id", n .. "-0", "dead-letter-reason", reason)
    end
    local r1, d1, r2 = letter("rejected", 1), letter("decode-error", 2), letter("rejected", 3)
    local junk = srv:cli("XADD", "payments.dead", "*", "note", "hand-written")
    local function dl(...) return helper.luastream("dead-letters", "delete", "--redis", srv.url, ...) end

    -- by id: without --yes only what it would do
    local code, out, err = dl("payments.dead", "--id", r1)
    assert.equal(0, code, out .. err)
    assert.matches("would delete " .. r1 .. " (rejected)", out, 1, true)
    assert.matches("would delete 1 dead letter from payments.dead: run again with --yes to delete it", out, 1, true)
    assert.equal(4, srv:xlen("payments.dead"))
    code, out, err = dl("payments.dead", "--id", r1, "--yes")
    assert.equal(0, code, out .. err)
    assert.matches("deleted 1 dead letter from payments.dead", out, 1, true)
    assert.same({}, srv:xrange("payments.dead", r1, r1))
    -- an id that is gone, or not a dead letter: refused, nothing deleted
    code, out, err = dl("payments.dead", "--id", r2, "--id", r1, "--yes")
    assert.equal(1, code, out .. err)
    assert.matches("no entry " .. r1 .. " on payments.dead", err, 1, true)
    code, out, err = dl("payments.dead", "--id", r2, "--id", junk, "--yes")
    assert.equal(1, code, out .. err)
    assert.matches("entry " .. junk .. " on payments.dead is not a dead letter", err, 1, true)
    assert.matches("nothing deleted", err, 1, true)
    assert.equal(3, srv:xlen("payments.dead"))
    -- by reason
    code, out, err = dl("payments.dead", "--reason", "decode-error")
    assert.equal(1, code, out .. err) -- the hand-written entry is left, named
    assert.matches("would delete " .. d1 .. " (decode-error)", out, 1, true)
    assert.matches("would delete 1 dead letter of reason decode-error from payments.dead", out, 1, true)
    assert.matches("(1 of other reasons left) (1 entry that is not a dead letter left)", out, 1, true)
    assert.matches("left " .. junk .. " on payments.dead: not a dead letter", err, 1, true)
    assert.equal(3, srv:xlen("payments.dead"))
    code, out, err = dl("payments.dead", "--reason", "decode-error", "--yes")
    assert.equal(1, code, out .. err)
    assert.matches("deleted 1 dead letter of reason decode-error from payments.dead", out, 1, true)
    assert.same({}, srv:xrange("payments.dead", d1, d1))
    assert.equal(1, #srv:xrange("payments.dead", r2, r2))
    code, out, err = dl("payments.dead", "--reason", "closed-account")
    assert.equal(2, code, out .. err)
    assert.matches("--reason closed-account: not a reason luastream writes; the reasons are handler-error, bad-return, rejected", err, 1, true)
    -- --all, in batches: 1,200 more dead letters of two reasons
    srv:cli("EVAL", [[for i = 1, 1200 do redis.call('XADD', KEYS[1], '*', 'data', '{}', 'dead-letter-stream', 'payments',
      'dead-letter-group', 'ledger', 'dead-letter-id', i .. '-0', 'dead-letter-reason', i % 2 == 0 and 'rejected' or 'too-large') end]],
      "1", "payments.dead")
    code, out, err = dl("payments.dead", "--reason", "rejected", "--yes")
    assert.equal(1, code, out .. err)
    assert.matches("deleted 601 dead letters of reason rejected from payments.dead", out, 1, true)
    assert.equal(1 + 600, srv:xlen("payments.dead"))
    code, out, err = dl("payments.dead", "--all", "--yes")
    assert.equal(1, code, out .. err)
    assert.matches("deleted 600 dead letters from payments.dead (1 entry that is not a dead letter left)", out, 1, true)
    local left = srv:xrange("payments.dead")
    assert.equal(1, #left)
    assert.equal(junk, left[1].id)
    -- a source stream given by mistake: nothing deleted, said so
    helper.publish(srv, "payments", helper.payment(1, "acme"))
    code, out, err = dl("payments", "--all", "--yes")
    assert.equal(1, code, out .. err)
    assert.matches("payments is not a dead-letter stream", err, 1, true)
    assert.equal(1, srv:xlen("payments"))
    -- missing: 0, exit 0
    code, out, err = dl("missing.dead", "--all", "--yes")
    assert.equal(0, code, out .. err)
    assert.matches("0 dead letters on missing.dead", out, 1, true)
    -- usage
    code, out, err = dl("payments.dead", "--yes")
    assert.equal(2, code, out .. err)
    assert.matches("--reason", err, 1, true)
    code = dl("payments.dead", "--all", "--reason", "rejected")
    assert.equal(2, code)
  end)
end)

-- ---- a host killed between the writes ----------------------------------------

describe("a dead letter is never lost", function()
  after_each(helper.cleanup)

  -- Rejects once the file `go` exists (so the test decides when the outcome is
  -- written; "/" always exists).
  local function gated(go, min_idle)
    return string.format([[
local ls = require "luastream"
return {
  stream = "payments", group = "ledger", read = "claiming", claim_fallback = true, min_idle = %d,
  dead_letter = "payments.dead",
  handle = function(payment, ctx)
    ls.log.info("rejecting", { entry_id = ctx.id })
    while not io.open(%q) do ls.sleep(20) end
    return ls.reject("poison")
  end,
}
]], min_idle, go)
  end

  it("killed while its outcome waits on the server: the entry stays pending, and another host dead-letters it", function()
    local srv = helper.redis_start()
    local go = helper.tmpdir("gate") .. "/go"
    local a = start_host(srv, { ["gated.lua"] = gated(go, 10000) })
    local id = helper.publish(srv, "payments", helper.payment(1, "acme"))
    a:wait_records({ msg = "rejecting" }, 1, 10, "the handler running")
    -- writes wait: the outcome script (the XACK and the dead letter's XADD) is held
    srv:cli("CLIENT", "PAUSE", "20000", "WRITE")
    local ok, err = pcall(function()
      helper.write_file(go, "")
      helper.wait_until(function() return srv:blocked_clients("eval") == 1 end, 10,
        "the outcome script held by the pause")
      a:signal("KILL")
      assert.equal(128 + 9, a:wait_exit(10))
    end)
    srv:cli("CLIENT", "UNPAUSE")
    assert(ok, err)
    local _, set = srv:pending_ids("payments", "ledger")
    assert.is_truthy(set[id], "the entry is no longer pending")
    assert.equal(0, srv:xlen("payments.dead"), "a dead letter was written without its ack")

    local b = start_host(srv, { ["gated.lua"] = gated(go, 200) })
    wait_xlen(srv, "payments.dead", 1, 10, "the dead letter written by host B")
    wait_pel_empty(srv)
    local f = srv:xrange("payments.dead")[1].fields
    assert.equal(id, f["dead-letter-id"])
    assert.equal("rejected", f["dead-letter-reason"])
    assert.equal("2", f["dead-letter-deliveries"], "the killed delivery counts")
    assert.equal(0, b:stop())
  end)

  it("a refused ack aborts the dead letter too: nothing is written without the ack", function()
    local srv = helper.redis_start()
    -- the host's user may do anything but XACK
    srv:cli("ACL", "SETUSER", "app", "on", ">secret", "~*", "&*", "+@all", "-xack")
    local url = string.format("redis://app:secret@127.0.0.1:%d", srv.port)
    -- min_idle 2 s: the claim after the refused one comes once XACK is allowed
    local h = helper.host_start({}, { url = url, dir = helper.handlers_dir({ ["gated.lua"] = gated("/", 2000) }) })
    h:wait_log(READY, 20, { plain = true })
    local id = helper.publish(srv, "payments", helper.payment(1, "acme"))
    local rec = h:wait_records({ msg = "outcome not written, entry left pending" }, 1, 10, "the refused transaction")[1]
    assert.equal("dead letter", rec.outcome)
    assert.equal(id, rec.id)
    -- the refused command and its key, not EXECABORT
    assert.equal("XACK", rec.command)
    assert.equal("payments", rec.key)
    assert.matches("^NOPERM", rec.error)
    assert.equal(0, srv:xlen("payments.dead"), "a dead letter was written without its ack")
    local _, set = srv:pending_ids("payments", "ledger")
    assert.is_truthy(set[id])

    -- once XACK is allowed, the next claim dead-letters it for good
    srv:cli("ACL", "SETUSER", "app", "+xack")
    wait_xlen(srv, "payments.dead", 1, 10, "the dead letter once XACK is allowed")
    wait_pel_empty(srv)
    local f = srv:xrange("payments.dead")[1].fields
    assert.equal(id, f["dead-letter-id"])
    assert.equal("2", f["dead-letter-deliveries"], "the refused delivery counts")
    assert.equal(0, h:stop())
  end)

  it("killed at any moment: every entry is pending or dead-lettered and acked, never neither nor both #slow", function()
    local srv = helper.redis_start()
    local REJECT_ALL = [[
local ls = require "luastream"
return {
  stream = "payments", group = "ledger", read = "claiming", claim_fallback = true, min_idle = %d,
  dead_letter = "payments.dead", workers = 8, start = "beginning",
  handle = function(payment)
    ls.sleep(1) -- a pace at which the kill lands mid-stream
    return ls.reject("poison")
  end,
}
]]
    local N = 2000
    for run, kill_at in ipairs { 1, 200, 800 } do
      srv:cli("FLUSHALL")
      local originals = {}
      local cmds = helper.payment_commands(1, N, 10)
      srv:pipe(cmds)
      for _, e in ipairs(srv:xrange("payments")) do originals[#originals + 1] = e.id end
      local h = helper.host_start({}, { server = srv, dir = helper.handlers_dir({ ["reject_all.lua"] = REJECT_ALL:format(60000) }) })
      helper.wait_until(function()
        local n = srv:xlen("payments.dead")
        return n >= kill_at, n .. " dead letters"
      end, 20, "run " .. run .. ": " .. kill_at .. " dead letters")
      h:signal("KILL")
      assert.equal(128 + 9, h:wait_exit(10))

      local dls = dead_letters_by_origin(srv)
      local _, pending = srv:pending_ids("payments", "ledger")
      local group = srv:group("payments", "ledger")
      local lost, both = {}, {}
      for _, id in ipairs(originals) do
        local delivered = helper.id_cmp(id, group["last-delivered-id"]) <= 0
        if dls[id] and pending[id] then both[#both + 1] = id end
        if not dls[id] and not pending[id] and delivered then lost[#lost + 1] = id end
      end
      assert.same({}, lost, "run " .. run .. ": entries neither pending nor dead-lettered")
      assert.same({}, both, "run " .. run .. ": dead letters still pending")

      -- another host finishes the job: every entry dead-lettered exactly once
      local b = helper.host_start({}, { server = srv, dir = helper.handlers_dir({ ["reject_all.lua"] = REJECT_ALL:format(200) }) })
      wait_xlen(srv, "payments.dead", N, 20, "run " .. run .. ": all " .. N .. " dead letters")
      wait_pel_empty(srv)
      assert.equal(N, count_keys(dead_letters_by_origin(srv)), "run " .. run)
      assert.equal(0, b:stop())
    end
  end)
end)
