-- read = "claiming" with claim_fallback = true on Redis older than 8.4: the
-- claiming semantics through a server-side script. Pending entries idle at
-- least min_idle come first (longest idle first), then new ones, sharing COUNT;
-- delivery-count is the number of deliveries before this one and idle-ms how
-- long the entry sat; a retry writes nothing and the entry comes back under
-- its own id once idle min_idle.
local helper = require "tests.integration.helper"
local cjson = require "cjson"

local READY = 'msg="host ready"'
local MIN_IDLE_MS = 400
local HANDLED = { msg = "payment handled" }

-- A claiming handler with the fallback; `extra` adds fields, `before` runs
-- first in handle (it may return an outcome).
local function claiming(extra, before)
  return string.format([[
local ls = require "luastream"
local deliveries = 0

return {
  stream = "payments", group = "ledger",
  read = "claiming", claim_fallback = true,
  %s
  handle = function(payment, ctx)
    deliveries = deliveries + 1
    local count = ctx.headers[ls.DELIVERY_COUNT_HEADER] or "none"
    local idle = ctx.headers[ls.IDLE_MS_HEADER] or "none"
    ls.log.info("payment started", {
      payment_id = payment.id, entry_id = ctx.id, delivery_count = count, idle_ms = idle, nth = deliveries,
    })
    %s
    ls.log.info("payment handled", {
      payment_id = payment.id, entry_id = ctx.id, delivery_count = count, idle_ms = idle,
    })
    return ls.ack()
  end,
}
]], extra or "min_idle = 400,", before or "")
end

-- Retries a payment of a "migrating-" account on its first delivery.
local RETRY_MIGRATING = claiming("min_idle = 400,", [[
    if payment.account:find("^migrating%-") and count == "0" then
      ls.log.warn("account locked, payment left pending", { payment_id = payment.id, entry_id = ctx.id })
      return ls.retry()
    end
]])

-- Never finishes a payment: the host that runs it is killed. Its min_idle is
-- long so that it never claims its own entries back while it runs.
local STUCK = claiming("min_idle = 60000,", "ls.sleep(60000)")

local function entry_ids(srv)
  local out = {}
  for _, e in ipairs(srv:xrange("payments")) do
    out[cjson.decode(e.fields.data).id] = e.id
  end
  return out
end

local function wait_pel_empty(srv)
  helper.wait_until(function()
    local ids = srv:pending_ids("payments", "ledger")
    return #ids == 0, #ids .. " pending"
  end, 10, "group ledger to have nothing pending")
end

local function pending_for(srv, consumer)
  return assert(srv:call("XPENDING", "payments", "ledger", "-", "+", "1000", consumer))
end

--[[ A host (consumer "doomed") running STUCK takes payments first..last, is
killed with SIGKILL, and its entries are then made to look abandoned long ago
(XCLAIM ... IDLE ms JUSTID keeps owner and delivery count): idle_ms maps a
payment id to the idle time it gets. ]]
local function abandon(srv, first, last, idle_ms)
  local k = helper.host_start({ "--consumer", "doomed" }, {
    server = srv, dir = helper.handlers_dir({ ["stuck.lua"] = STUCK }),
  })
  k:wait_log(READY, 20, { plain = true })
  srv:pipe(helper.payment_commands(first, last, 3))
  local n = last - first + 1
  helper.wait_until(function()
    local p = pending_for(srv, "doomed")
    return #p == n, #p .. " pending for doomed"
  end, 20, n .. " payments pending for the doomed host")
  k:signal("KILL")
  assert.equal(128 + 9, k:wait_exit(10))
  local ids = entry_ids(srv)
  for id, idle in pairs(idle_ms) do
    assert.equal(ids[id], srv:cli("XCLAIM", "payments", "ledger", "doomed", "0", ids[id], "IDLE", idle, "JUSTID"))
  end
  return ids
end

local function start_host(srv, src, consumer)
  local h = helper.host_start({ "--consumer", consumer or "live" }, {
    server = srv, dir = helper.handlers_dir({ ["post_payment.lua"] = src }),
  })
  h:wait_log(READY, 20, { plain = true })
  return h
end

describe("claiming with claim_fallback on Redis 7.0", function()
  after_each(helper.cleanup)

  it("gives new entries delivery-count 0 and idle-ms 0", function()
    local srv = helper.redis_start()
    local host = start_host(srv, claiming())
    srv:pipe(helper.payment_commands(1, 3, 3))
    local recs = host:wait_records(HANDLED, 3, 10, "3 payments handled")
    for _, rec in ipairs(recs) do
      assert.equal("0", rec.delivery_count, rec._line)
      assert.equal("0", rec.idle_ms, rec._line)
    end
    wait_pel_empty(srv)
    assert.equal(3, srv:xlen("payments"))
    assert.equal(0, host:stop())
  end)

  it("leaves a retried entry pending; it comes back under its id after min_idle, with no copy", function()
    local srv = helper.redis_start()
    local host = start_host(srv, RETRY_MIGRATING)
    local locked = helper.publish(srv, "payments", helper.payment(1, "migrating-acme", 700), { key = "migrating-acme" })
    local plain = helper.publish(srv, "payments", helper.payment(2, "acme", 800), { key = "acme" })

    local warned = host:wait_records({ msg = "account locked, payment left pending" }, 1, 10, "the locked payment retried")[1]
    assert.equal(locked, warned.entry_id)

    -- Nothing written: it waited in the pending list under its own id, which
    -- the delivery that brings it back shows (same id, delivered once before,
    -- idle at least min_idle; no copy on the stream, checked at the end).
    -- Not by reading the pending list now: on a slow run it may already have
    -- come back and been acked. Nor by the log's timestamps (how soon it came
    -- back, or a gap that the first run's own delay shortens): idle-ms is
    -- what Redis measured.
    local back = host:wait_records({ msg = "payment handled", payment_id = 1 }, 1, 10, "the locked payment back")[1]
    assert.equal(locked, back.entry_id, "it came back under another id")
    assert.equal("1", back.delivery_count)
    assert.is_true(tonumber(back.idle_ms) >= MIN_IDLE_MS, "idle-ms " .. back.idle_ms)

    local once = host:wait_records({ msg = "payment handled", payment_id = 2 }, 1, 10, "the other payment")
    assert.equal(1, #once)
    assert.equal(plain, once[1].entry_id)
    assert.equal("0", once[1].delivery_count)
    wait_pel_empty(srv)
    assert.equal(2, srv:xlen("payments"), "a copy was appended")
    assert.equal(2, host:count({ msg = "payment started", payment_id = 1 }))
    assert.equal(0, host:stop())
  end)

  it("hands a killed host's entries to the live one first, longest idle first, then new ones", function()
    local srv = helper.redis_start()
    -- payment 3 abandoned longest ago, then 1, then 2
    abandon(srv, 1, 3, { [3] = 5000, [1] = 4000, [2] = 3000 })
    srv:pipe(helper.payment_commands(4, 6, 3))
    local ids = entry_ids(srv)
    local host = start_host(srv, claiming("min_idle = 400, workers = 1,"))
    local recs = host:wait_records(HANDLED, 6, 10, "6 payments handled")
    wait_pel_empty(srv)

    local order, counts = {}, {}
    for i, rec in ipairs(recs) do
      order[i] = tonumber(rec.payment_id)
      counts[i] = rec.delivery_count
      assert.equal(ids[order[i]], rec.entry_id)
    end
    assert.same({ 3, 1, 2, 4, 5, 6 }, order)
    assert.same({ "1", "1", "1", "0", "0", "0" }, counts)
    assert.is_true(tonumber(recs[1].idle_ms) >= 5000, recs[1]._line)
    assert.is_true(tonumber(recs[2].idle_ms) >= 4000, recs[2]._line)
    assert.is_true(tonumber(recs[3].idle_ms) >= 3000, recs[3]._line)
    for i = 4, 6 do assert.equal("0", recs[i].idle_ms) end
    assert.equal(6, srv:xlen("payments"), "entries appended to the stream")
    assert.equal(0, host:stop())
  end)

  it("shares COUNT: batch = 2 with 3 claimable and 3 new entries reads 2 claimed first", function()
    local srv = helper.redis_start()
    local ids = abandon(srv, 1, 3, { [3] = 50000, [1] = 40000, [2] = 30000 })
    srv:pipe(helper.payment_commands(4, 6, 3))
    local last_delivered = srv:group("payments", "ledger")["last-delivered-id"]
    assert.equal(ids[3], last_delivered)
    -- The first two deliveries hold both lanes until the spec has looked (the
    -- gate file; at most 15 s, under min_idle, so they cannot become
    -- claimable meanwhile); with no free lane nothing more is read, so the
    -- group shows what the first read took. A fixed hold (400 ms) let a slow
    -- look see the second read.
    local gate = helper.tmpdir("gate") .. "/open"
    local host = start_host(srv, claiming("min_idle = 20000, batch = 2, workers = 2,", string.format([[
    if deliveries <= 2 then
      local held = 0
      while not io.open(%q) and held < 15000 do ls.sleep(20) held = held + 20 end
    end]], gate)))
    local started = host:wait_records({ msg = "payment started" }, 2, 10, "the first read's 2 entries started")
    local taken = {}
    for _, p in ipairs(pending_for(srv, "live")) do taken[p[1]] = p[4] end
    local group = srv:group("payments", "ledger")
    assert.same({ [ids[3]] = 2, [ids[1]] = 2 }, taken)
    assert.equal(last_delivered, group["last-delivered-id"], "the first read also took new entries")
    local first_two = { [started[1].payment_id] = true, [started[2].payment_id] = true }
    assert.same({ ["3"] = true, ["1"] = true }, first_two)
    helper.write_file(gate, "")

    local recs = host:wait_records(HANDLED, 6, 10, "6 payments handled")
    wait_pel_empty(srv)
    local pos, count = {}, {}
    for i, rec in ipairs(host:records({ msg = "payment started" })) do
      local id = tonumber(rec.payment_id)
      assert.is_nil(pos[id], "payment " .. id .. " started twice")
      pos[id], count[id] = i, rec.delivery_count
    end
    for id = 4, 6 do
      assert.is_true(pos[2] < pos[id], "new payment " .. id .. " read before the last claimable one")
    end
    assert.same({ "1", "1", "1", "0", "0", "0" }, count)
    assert.equal(6, #recs)
    assert.equal(6, srv:xlen("payments"))
    assert.equal(0, host:stop())
  end)
  it("takes over 9000 entries a dead consumer left pending, with batch 9000", function()
    -- More ids than Lua's unpack passes to one XCLAIM (about 8000).
    local srv = helper.redis_start()
    local n = 9000
    assert(srv:call("XGROUP", "CREATE", "payments", "ledger", "$", "MKSTREAM"))
    srv:pipe(helper.payment_commands(1, n, 3))
    assert(srv:call("XREADGROUP", "GROUP", "ledger", "dead", "COUNT", n, "STREAMS", "payments", ">"))
    assert.equal(n, #srv:pending_ids("payments", "ledger"))
    local host = start_host(srv, claiming("min_idle = 400, batch = 9000,"))
    helper.wait_until(function()
      local ids = srv:pending_ids("payments", "ledger")
      return #ids == 0, #ids .. " pending"
    end, 60, "group ledger to have nothing pending")
    assert.equal(n, host:count(HANDLED))
    assert.equal(0, host:count({ msg = "read failed, retrying" }))
    assert.equal(0, host:stop())
  end)
end)
