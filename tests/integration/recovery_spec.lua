-- Crash recovery before Redis 8.4: a `new` subscription and a `reclaim`
-- subscription of the same group. Entries a killed worker left pending are
-- claimed with XAUTOCLAIM once idle min_idle (even when nothing new arrives),
-- carry delivery-count (Redis's count after the claim) and idle-ms, entries
-- deleted while pending are dropped with a warning, and a retry on reclaim
-- leaves the entry pending under its own id.
local helper = require "tests.integration.helper"
local cjson = require "cjson"

local READY = 'msg="host ready"'
local MIN_IDLE_MS = 500
local POSTED = { msg = "payment posted" }
local RECOVERED = { msg = "payment recovered" }
local DROPPED = 'pending entry no longer in the stream, dropped'

-- Host A's ledger handler: takes payments and never finishes them, so they stay
-- pending under A's consumer until A is killed.
local STUCK = [[
local ls = require "luastream"

return {
  stream = "payments", group = "ledger",
  workers = 8, by_key = true,
  handle = function(payment, ctx)
    ls.log.info("payment started", { payment_id = payment.id, entry_id = ctx.id })
    ls.sleep(60000)
  end,
}
]]

local POST_NEW = [[
local ls = require "luastream"

return {
  stream = "payments", group = "ledger",
  workers = 8, by_key = true,
  handle = function(payment, ctx)
    ls.log.info("payment posted", {
      payment_id = payment.id, entry_id = ctx.id,
      delivery_count = ctx.headers[ls.DELIVERY_COUNT_HEADER] or "none",
    })
    return ls.ack()
  end,
}
]]

local RECOVER = [[
local ls = require "luastream"

return {
  stream = "payments", group = "ledger",
  read = "reclaim", min_idle = "500ms",
  handle = function(payment, ctx)
    ls.log.warn("payment recovered", {
      payment_id = payment.id, entry_id = ctx.id, consumer = ctx.consumer,
      delivery_count = ctx.headers[ls.DELIVERY_COUNT_HEADER] or "none",
      idle_ms = ctx.headers[ls.IDLE_MS_HEADER] or "none",
    })
    return ls.ack()
  end,
}
]]

-- Retries the first delivery it sees of each entry, acks the next one.
local RECOVER_RETRY_ONCE = [[
local ls = require "luastream"
local seen = {}

return {
  stream = "payments", group = "ledger",
  read = "reclaim", min_idle = 500,
  handle = function(payment, ctx)
    local first = not seen[ctx.id]
    seen[ctx.id] = true
    ls.log.warn("payment recovered", {
      payment_id = payment.id, entry_id = ctx.id,
      delivery_count = ctx.headers[ls.DELIVERY_COUNT_HEADER] or "none",
      idle_ms = ctx.headers[ls.IDLE_MS_HEADER] or "none",
      outcome = first and "retry" or "ack",
    })
    if first then return ls.retry() end
    return ls.ack()
  end,
}
]]

-- payment id (number) -> entry id, from the stream itself
local function entry_ids(srv)
  local out = {}
  for _, e in ipairs(srv:xrange("payments")) do
    out[cjson.decode(e.fields.data).id] = e.id
  end
  return out
end

local function pending_for(srv, consumer)
  return assert(srv:call("XPENDING", "payments", "ledger", "-", "+", "100000", consumer))
end

local function wait_pel_empty(srv, timeout_s)
  helper.wait_until(function()
    local ids = srv:pending_ids("payments", "ledger")
    return #ids == 0, #ids .. " pending: " .. table.concat(ids, " ", 1, math.min(#ids, 10))
  end, timeout_s or 10, "group ledger to have nothing pending")
end

--[[ Host A (consumer host-a) takes payments first..last and never finishes
them; once all of them are pending under host-a it is killed with SIGKILL.
Returns the time of A's first "payment started" line (seconds, log clock). ]]
local function abandon(srv, first, last, accounts)
  local a = helper.host_start({ "--consumer", "host-a" }, {
    server = srv, dir = helper.handlers_dir({ ["stuck.lua"] = STUCK }),
  })
  a:wait_log(READY, 20, { plain = true })
  srv:pipe(helper.payment_commands(first, last, accounts or 5))
  local n = last - first + 1
  helper.wait_until(function()
    local p = pending_for(srv, "host-a")
    return #p == n, #p .. " pending for host-a"
  end, 20, n .. " payments pending for host-a")
  local started = a:wait_records({ msg = "payment started" }, 1, 10, "host A running a payment")
  a:signal("KILL")
  assert.equal(128 + 9, a:wait_exit(10))
  return helper.parse_time(started[1].time)
end

local function ready_time(host)
  local _, rec = host:wait_log(READY, 20, { plain = true })
  return helper.parse_time(rec.time)
end

describe("recovery with a reclaim subscription beside a new one", function()
  after_each(helper.cleanup)

  it("recovers every payment a killed worker held, without anything new arriving", function()
    local srv = helper.redis_start()
    local N = 50
    abandon(srv, 1, N, 5)
    local ids = entry_ids(srv)
    local xlen = srv:xlen("payments")

    local b = helper.host_start({ "--consumer", "host-b" }, {
      server = srv, dir = helper.handlers_dir({ ["post_new.lua"] = POST_NEW, ["recover.lua"] = RECOVER }),
    })
    local ready = ready_time(b)
    -- nothing is published: the reclaim subscription finds them on its own
    local recovered = b:wait_records(RECOVERED, N, 10, N .. " payments recovered")
    wait_pel_empty(srv)

    local seen, last = {}, ready
    for _, rec in ipairs(recovered) do
      local id = tonumber(rec.payment_id)
      seen[id] = true
      assert.equal(ids[id], rec.entry_id, "entry id of payment " .. id)
      -- A delivered it once; the claim is the second delivery
      assert.equal("2", rec.delivery_count, "delivery-count of payment " .. id)
      assert.is_true(tonumber(rec.idle_ms) >= MIN_IDLE_MS, "idle-ms of payment " .. id .. ": " .. rec.idle_ms)
      last = math.max(last, helper.parse_time(rec.time))
    end
    for id = 1, N do assert.is_true(seen[id], "payment " .. id .. " recovered") end
    assert.is_true(last - ready <= 3, string.format("all recovered %.2f s after host B was ready", last - ready))
    assert.equal(0, b:count(POSTED), "the new subscription handled an old payment")

    -- the new subscription carries on with payments published now
    srv:pipe(helper.payment_commands(N + 1, N + 10, 5))
    b:wait_records(POSTED, 10, 10, "the 10 new payments posted")
    wait_pel_empty(srv)
    for _, rec in ipairs(b:records(POSTED)) do
      assert.is_true(tonumber(rec.payment_id) > N, "posted an old payment: " .. rec._line)
      assert.equal("none", rec.delivery_count)
    end
    assert.equal(xlen + 10, srv:xlen("payments"), "entries appended besides the 10 payments")
    assert.equal(0, b:stop())
  end)

  it("redelivers an abandoned entry within min_idle + 1 s of its delivery", function()
    local srv = helper.redis_start()
    -- the reclaim subscription alone: every new entry goes to host A
    local b = helper.host_start({ "--consumer", "host-b" }, {
      server = srv, dir = helper.handlers_dir({ ["recover.lua"] = RECOVER }),
    })
    b:wait_log(READY, 20, { plain = true })
    local delivered = abandon(srv, 1, 1)
    local rec = b:wait_records(RECOVERED, 1, 10, "the payment recovered")[1]
    local after = helper.parse_time(rec.time) - delivered
    assert.is_true(after >= MIN_IDLE_MS / 1000 - 0.05, string.format("recovered %.3f s after delivery", after))
    assert.is_true(after <= MIN_IDLE_MS / 1000 + 1, string.format("recovered %.3f s after delivery", after))
    assert.equal("2", rec.delivery_count)
    wait_pel_empty(srv)
    assert.equal(0, b:stop())
  end)

  it("drops pending entries deleted from the stream with a warning, never calling the handler", function()
    local srv = helper.redis_start()
    abandon(srv, 1, 6, 3)
    local ids = entry_ids(srv)
    local deleted = { [ids[2]] = true, [ids[5]] = true }
    assert.equal(2, srv:call("XDEL", "payments", ids[2], ids[5]))
    assert.equal(6, #(srv:pending_ids("payments", "ledger")))

    local b = helper.host_start({ "--consumer", "host-b" }, {
      server = srv, dir = helper.handlers_dir({ ["post_new.lua"] = POST_NEW, ["recover.lua"] = RECOVER }),
    })
    b:wait_log(READY, 20, { plain = true })
    b:wait_records(RECOVERED, 4, 10, "the 4 remaining payments recovered")
    b:wait_records({ msg = DROPPED }, 2, 10, "the 2 deleted entries dropped")
    wait_pel_empty(srv)

    local dropped = {}
    for _, rec in ipairs(b:records({ msg = DROPPED })) do
      assert.equal("warn", rec.level)
      assert.equal("payments", rec.stream)
      assert.equal("ledger", rec.group)
      assert.is_true(deleted[rec.id], "dropped an entry that was not deleted: " .. rec._line)
      assert.is_nil(dropped[rec.id], "dropped twice: " .. rec._line)
      dropped[rec.id] = true
    end
    assert.same(deleted, dropped)

    local recovered = {}
    for _, rec in ipairs(b:records(RECOVERED)) do
      assert.is_nil(deleted[rec.entry_id], "the handler got a deleted entry: " .. rec._line)
      recovered[tonumber(rec.payment_id)] = (recovered[tonumber(rec.payment_id)] or 0) + 1
    end
    assert.same({ [1] = 1, [3] = 1, [4] = 1, [6] = 1 }, recovered)
    assert.equal(0, b:count(POSTED))
    assert.equal(4, srv:xlen("payments"))
    assert.equal(0, b:stop())
  end)

  it("leaves a retried entry pending: it comes back after min_idle, counted, with no copy", function()
    local srv = helper.redis_start()
    abandon(srv, 1, 2, 2)
    local ids = entry_ids(srv)
    local xlen = srv:xlen("payments")

    local b = helper.host_start({ "--consumer", "host-b" }, {
      server = srv, dir = helper.handlers_dir({ ["post_new.lua"] = POST_NEW, ["recover.lua"] = RECOVER_RETRY_ONCE }),
    })
    b:wait_log(READY, 20, { plain = true })
    -- while the first delivery's retry is waiting, the entry stays pending under its id
    local firsts = b:wait_records({ msg = "payment recovered", outcome = "retry" }, 2, 10, "both first recoveries")
    helper.wait_until(function()
      local _, set = srv:pending_ids("payments", "ledger")
      return set[ids[1]] and set[ids[2]], "pending: " .. cjson.encode(set)
    end, 5, "the retried entries still pending")
    b:wait_records(RECOVERED, 4, 10, "both payments recovered a second time")
    wait_pel_empty(srv)

    for id = 1, 2 do
      local recs = b:records({ msg = "payment recovered", payment_id = id })
      assert.equal(2, #recs, "deliveries of payment " .. id)
      local first, second = recs[1], recs[2]
      assert.equal("retry", first.outcome)
      assert.equal("ack", second.outcome)
      assert.equal(ids[id], first.entry_id)
      assert.equal(ids[id], second.entry_id, "the retried payment came back under another id")
      assert.equal(tonumber(first.delivery_count) + 1, tonumber(second.delivery_count), "delivery-count after the retry")
      assert.is_true(tonumber(second.idle_ms) >= MIN_IDLE_MS, "idle-ms after the retry: " .. second.idle_ms)
      local gap = helper.parse_time(second.time) - helper.parse_time(first.time)
      assert.is_true(gap >= MIN_IDLE_MS / 1000 - 0.05, string.format("back %.3f s after the retry", gap))
      assert.is_true(gap <= MIN_IDLE_MS / 1000 + 1, string.format("back %.3f s after the retry", gap))
    end
    assert.equal(2, #firsts)
    assert.equal(xlen, srv:xlen("payments"), "a retry on reclaim appended to the stream")
    assert.equal(0, b:count(POSTED), "the new subscription got a copy")
    assert.equal(0, b:stop())
  end)

  it("runs the shipped before-8.4 set: recover_payment logs each payment it takes over", function()
    local srv = helper.redis_start()
    abandon(srv, 1, 3, 3)
    local shipped = helper.repo_root .. "/handlers/before-8.4/"
    -- the shipped file with a MIN_IDLE a test can wait for
    local recover, n = helper.read_file(shipped .. "recover_payment.lua")
      :gsub("(local MIN_IDLE%s*=%s*)[^\n%-]+", "%1500 ")
    assert.equal(1, n, "no `local MIN_IDLE = ...` line in recover_payment.lua")
    local dir = helper.handlers_dir({
      ["post_new_payment.lua"] = helper.read_file(shipped .. "post_new_payment.lua"),
      ["screen_payment.lua"] = helper.read_file(shipped .. "screen_payment.lua"),
      ["recover_payment.lua"] = recover,
    })
    local b = helper.host_start({ "--consumer", "host-b" }, { server = srv, dir = dir })
    b:wait_log(READY, 20, { plain = true })
    local recs = b:wait_records({ msg = "payment recovered from a stopped worker" }, 3, 10, "3 payments recovered")
    wait_pel_empty(srv)
    local seen = {}
    for _, rec in ipairs(recs) do
      assert.equal("recover_payment", rec.handler)
      assert.equal("2", rec.deliveries, rec._line)
      seen[tonumber(rec.payment_id)] = true
    end
    assert.same({ true, true, true }, seen)
    -- the fraud group, created now at the beginning, screens all three
    helper.wait_until(function()
      local screened = srv:xlen("payments.screened")
      return screened == 3, screened .. " screened"
    end, 10, "3 replies on payments.screened")
    srv:pipe(helper.payment_commands(4, 4, 3))
    b:wait_records({ msg = "payment posted", payment_id = 4 }, 1, 10, "payment 4 posted")
    assert.equal(0, b:stop())
  end)
end)
