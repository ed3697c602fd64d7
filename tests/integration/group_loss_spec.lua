-- The group or the stream disappears under a running host (FLUSHALL, XGROUP
-- DESTROY, DEL): each subscription says so, creates its group again at its
-- configured start, backs off instead of spinning, and carries on with the
-- entries published afterwards. Every read loop is covered: `new`,
-- `claiming` with claim_fallback, and `reclaim` (beside a `new` subscription of
-- its group, and alone in one).
local helper = require "tests.integration.helper"

local READY = 'msg="host ready"'
local GONE = "group or stream disappeared, creating it again"
local CREATED = "group created"

local function handler(group, extra)
  return string.format([[
local ls = require "luastream"

return {
  stream = "payments", group = %q,
  %s
  handle = function(payment, ctx)
    ls.log.info("payment started", { payment_id = payment.id })
    if payment.slow then ls.sleep(200) end -- well under min_idle
    ls.log.info("payment handled", {
      payment_id = payment.id, entry_id = ctx.id,
      delivery_count = ctx.headers[ls.DELIVERY_COUNT_HEADER] or "none",
    })
  end,
}
]], group, extra or "")
end

-- ledger reads new entries from "new"; recover reclaims in the same group;
-- audit claims (through the fallback) and starts at the beginning, so a
-- re-created audit group reads the stream again; ops is a reclaim
-- subscription alone in its group.
local HANDLERS = {
  ["ledger.lua"] = handler("ledger"),
  ["recover.lua"] = handler("ledger", 'read = "reclaim", min_idle = 400,'),
  ["audit.lua"] = handler("audit", 'read = "claiming", claim_fallback = true, min_idle = 400, start = "beginning",'),
  ["ops.lua"] = handler("ops", 'read = "reclaim", min_idle = "400ms",'),
}
-- handler -> its group and configured start
local SUBS = {
  ledger = { group = "ledger", start = "new" },
  recover = { group = "ledger", start = "new" },
  audit = { group = "audit", start = "beginning" },
  ops = { group = "ops", start = "new" },
}

local function start(srv, files)
  local host = helper.host_start({}, { server = srv, dir = helper.handlers_dir(files or HANDLERS) })
  host:wait_log(READY, 20, { plain = true })
  return host
end

local function publish(srv, id)
  return helper.publish(srv, "payments", helper.payment(id, "acme", 100 + id), { key = "acme" })
end

local function handled(host, name, id)
  return host:count({ msg = "payment handled", handler = name, payment_id = id })
end

local function wait_handled(host, name, id)
  return host:wait_records({ msg = "payment handled", handler = name, payment_id = id }, 1, 10,
    name .. " handling payment " .. id)
end

-- After `mark`: each subscription of `names` logged the loss (naming stream and
-- group) and reads again; each group was created again at its configured start
-- by one of its subscriptions. (recover is left out of `names`: ledger, polled
-- continuously, usually re-creates their group before recover's next poll, and
-- then recover never meets the missing group.)
local function wait_recreated(host, mark, names)
  local groups = {}
  for _, name in ipairs(names) do
    local sub = SUBS[name]
    local gone = host:wait_records(function(r)
      return r._pos > mark and r.msg == GONE and r.handler == name
    end, 1, 10, name .. " reporting the lost group")[1]
    assert.equal("error", gone.level)
    assert.equal("payments", gone.stream)
    assert.equal(sub.group, gone.group)
    host:wait_records(function(r)
      return r._pos > gone._pos and r.msg == "subscription reading" and r.handler == name
    end, 1, 10, name .. " reading again")
    groups[sub.group] = sub.start
  end
  for group, start_at in pairs(groups) do
    local created = host:wait_records(function(r)
      return r._pos > mark and r.msg == CREATED and r.group == group
    end, 1, 10, "group " .. group .. " created again")
    assert.equal(1, #created, "group " .. group .. " created more than once")
    assert.equal("payments", created[1].stream)
    assert.equal(start_at, created[1].start)
  end
end

-- Lets ~2 s pass after `t0` and checks that no subscription of `names` logged
-- more than `most` errors or warnings after `mark`: a backoff, not a busy loop.
local function assert_no_busy_loop(host, mark, t0, most, names)
  local wait = t0 + 2 - helper.now()
  if wait > 0 then os.execute(string.format("sleep %.3f", wait)) end
  for _, name in ipairs(names) do
    local n = host:count(function(r)
      return r._pos > mark and r.handler == name and (r.level == "error" or r.level == "warn")
    end)
    assert.is_true(n <= most, string.format("%s logged %d errors/warnings in 2 s", name, n))
  end
  assert.is_true(host:alive())
end

local REPORTING = { "ledger", "audit", "ops" }
local ALL = { "ledger", "recover", "audit", "ops" }

local function wait_nothing_pending(srv, group)
  helper.wait_until(function()
    local ids = srv:pending_ids("payments", group)
    return #ids == 0, #ids .. " pending"
  end, 10, "group " .. group .. " to have nothing pending")
end

-- The reclaim subscriptions carry on too: payment `id` is made pending in
-- ledger (after ledger acked it) and in ops under a consumer that went away
-- long ago (XCLAIM ... IDLE 5000 FORCE), and recover and ops take it over.
local function assert_reclaims(srv, host, id, entry_id)
  wait_nothing_pending(srv, "ledger")
  for _, group in ipairs { "ledger", "ops" } do
    assert.equal(entry_id, srv:cli("XCLAIM", "payments", group, "gone", "0", entry_id, "IDLE", "5000", "FORCE", "JUSTID"))
  end
  wait_handled(host, "recover", id)
  wait_handled(host, "ops", id)
  wait_nothing_pending(srv, "ledger")
  wait_nothing_pending(srv, "ops")
end

describe("group or stream lost under a running host", function()
  after_each(helper.cleanup)

  it("FLUSHALL: every subscription creates its group again and carries on", function()
    local srv = helper.redis_start()
    local host = start(srv)
    publish(srv, 1)
    wait_handled(host, "ledger", 1)
    wait_handled(host, "audit", 1)

    local mark, t0 = host:mark(), helper.now()
    srv:cli("FLUSHALL")
    wait_recreated(host, mark, REPORTING)
    local id2 = publish(srv, 2)
    wait_handled(host, "ledger", 2)
    local rec = wait_handled(host, "audit", 2)[1]
    assert.equal("0", rec.delivery_count)
    assert_reclaims(srv, host, 2, id2)
    assert_no_busy_loop(host, mark, t0, 3, ALL)
    assert.equal(1, handled(host, "ledger", 2))
    assert.equal(1, handled(host, "audit", 2))
    assert.equal(1, handled(host, "recover", 2))
    assert.equal(0, handled(host, "recover", 1))
    assert.equal(0, host:stop())
  end)

  it("XGROUP DESTROY: each group is created again at its configured start", function()
    local srv = helper.redis_start()
    local host = start(srv)
    publish(srv, 1)
    wait_handled(host, "ledger", 1)
    wait_handled(host, "audit", 1)

    local mark, t0 = host:mark(), helper.now()
    for _, group in ipairs { "ledger", "audit", "ops" } do
      assert.equal(1, srv:call("XGROUP", "DESTROY", "payments", group))
    end
    wait_recreated(host, mark, REPORTING)
    -- audit starts at the beginning: it reads payment 1 again, as a new entry
    -- of the new group; ledger starts at new entries only
    local again = host:wait_records({ msg = "payment handled", handler = "audit", payment_id = 1 }, 2, 10,
      "audit reading payment 1 again")
    assert.equal("0", again[2].delivery_count)
    local id2 = publish(srv, 2)
    wait_handled(host, "ledger", 2)
    wait_handled(host, "audit", 2)
    assert_reclaims(srv, host, 2, id2)
    assert_no_busy_loop(host, mark, t0, 3, ALL)
    assert.equal(1, handled(host, "ledger", 1))
    assert.equal(1, handled(host, "ledger", 2))
    assert.equal(2, handled(host, "audit", 1))
    assert.equal(1, handled(host, "audit", 2))
    assert.same({}, (srv:pending_ids("payments", "ledger")))
    assert.same({}, (srv:pending_ids("payments", "audit")))
    assert.equal(0, host:stop())
  end)

  it("DEL of the stream: the groups come back with it", function()
    local srv = helper.redis_start()
    local host = start(srv)
    publish(srv, 1)
    wait_handled(host, "ledger", 1)
    wait_handled(host, "audit", 1)

    local mark, t0 = host:mark(), helper.now()
    assert.equal(1, srv:call("DEL", "payments"))
    wait_recreated(host, mark, REPORTING)
    local id2 = publish(srv, 2)
    wait_handled(host, "ledger", 2)
    wait_handled(host, "audit", 2)
    assert_reclaims(srv, host, 2, id2)
    assert_no_busy_loop(host, mark, t0, 3, ALL)
    assert.equal(0, host:stop())
  end)

  it("XGROUP DESTROY while handlers run and no read is outstanding", function()
    local srv = helper.redis_start()
    -- batch = 1: while its one entry runs, a subscription has no read outstanding,
    -- so it meets the missing group in its next read (audit: the claim script)
    local host = start(srv, {
      ["ledger.lua"] = handler("ledger", "batch = 1,"),
      ["audit.lua"] = handler("audit", 'read = "claiming", claim_fallback = true, min_idle = 400, start = "beginning", batch = 1,'),
    })
    helper.publish(srv, "payments", '{"id":1,"account":"acme","amount_cents":101,"slow":true}', { key = "acme" })
    for _, name in ipairs { "ledger", "audit" } do
      host:wait_records({ msg = "payment started", handler = name, payment_id = 1 }, 1, 10, name .. " running payment 1")
    end
    local mark, t0 = host:mark(), helper.now()
    assert.equal(1, srv:call("XGROUP", "DESTROY", "payments", "ledger"))
    assert.equal(1, srv:call("XGROUP", "DESTROY", "payments", "audit"))
    wait_recreated(host, mark, { "ledger", "audit" })
    publish(srv, 2)
    wait_handled(host, "ledger", 2)
    wait_handled(host, "audit", 2)
    assert_no_busy_loop(host, mark, t0, 4, { "ledger", "audit" })
    -- audit's new group starts at the beginning: payment 1 once more
    assert.equal(2, handled(host, "audit", 1))
    assert.equal(1, handled(host, "ledger", 1))
    assert.equal(1, handled(host, "ledger", 2))
    assert.equal(1, handled(host, "audit", 2))
    assert.equal(0, host:stop())
  end)

  it("backs off while the key cannot hold the group, and recovers once it can", function()
    local srv = helper.redis_start()
    local host = start(srv)
    local mark, t0 = host:mark(), helper.now()
    -- the stream is replaced by a string in one transaction: creating the
    -- group, or reading, fails (WRONGTYPE) for as long as the string is there
    srv:pipe({ { "MULTI" }, { "FLUSHALL" }, { "SET", "payments", "not a stream" }, { "EXEC" } })
    for _, name in ipairs(ALL) do
      host:wait_records(function(r)
        return r._pos > mark and (r.level == "error" or r.level == "warn") and r.handler == name
      end, 1, 10, name .. " reporting the problem")
    end
    -- doubling from 100 ms gives about 5 attempts in 2 s; a busy loop, hundreds
    assert_no_busy_loop(host, mark, t0, 10, ALL)

    local freed = host:mark()
    assert.equal(1, srv:call("DEL", "payments"))
    for _, group in ipairs { "ledger", "audit", "ops" } do
      host:wait_records(function(r)
        return r._pos > freed and r.msg == CREATED and r.group == group
      end, 1, 15, "group " .. group .. " created once the key is free")
    end
    local id1 = publish(srv, 1)
    wait_handled(host, "ledger", 1)
    wait_handled(host, "audit", 1)
    assert_reclaims(srv, host, 1, id1)
    assert.equal(0, host:stop())
  end)
end)
