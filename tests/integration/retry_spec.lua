-- Retry on a `new` subscription: one script call appends a copy of the entry
-- (delivery-count + 1, original-id) to the group's retry stream and acks the
-- original; other groups of the stream never see the copy. luastream's header
-- names written by a producer on the shared stream change nothing.
local helper = require "tests.integration.helper"
local cjson = require "cjson"

local READY = 'msg="host ready"'

local RETRY_ONCE = [[
local ls = require "luastream"

return {
  stream = "payments", group = "ledger",
  handle = function(payment, ctx)
    local count = ctx.headers[ls.DELIVERY_COUNT_HEADER]
    ls.log.info("payment seen", { payment_id = payment.id, delivery_count = count or "none" })
    if count == nil then return ls.retry() end
    ls.log.info("payment posted", { payment_id = payment.id, delivery_count = count })
    return ls.ack()
  end,
}
]]

-- true when args holds name, value as neighbours (a field of an XADD)
local function has_field(args, name, value)
  for i = 3, #args - 1 do
    if args[i] == name and args[i + 1] == value then return true end
  end
  return false
end

-- Checks in MONITOR output that the copy's XADD and the original's XACK ran in
-- one outcome script call (the XACK first: the copy is written only if it
-- acknowledged the original).
local function assert_copied_in_one_transaction(commands, original_id, data)
  local block, why = helper.script_block(commands, function(args)
    return args[1]:upper() == "XADD" and args[2] == "payments:retry:ledger"
      and has_field(args, "original-id", original_id) and has_field(args, "data", data)
  end)
  assert(block, "the copy of " .. original_id .. ": " .. tostring(why))
  local xack, xadd
  for i, args in ipairs(block) do
    local name = args[1]:upper()
    if name == "XACK" and args[2] == "payments" and args[3] == "ledger" and args[4] == original_id then
      xack = i
    elseif name == "XADD" and has_field(args, "original-id", original_id) then
      xadd = i
    end
  end
  assert(xack, "no XACK of " .. original_id .. " in the script call of its copy")
  assert(xack < xadd, "the copy of " .. original_id .. " written before the XACK that allows it")
end

describe("retry on a new subscription", function()
  after_each(helper.cleanup)

  it("appends a copy to the group's retry stream and acks the original in one transaction; other groups never see it", function()
    local srv = helper.redis_start()
    local monitor = srv:monitor()
    local dir = helper.handlers_dir({
      ["post_with_retry.lua"] = RETRY_ONCE,
      ["screen_payment.lua"] = helper.read_file(helper.repo_root .. "/handlers/before-8.4/screen_payment.lua"),
    })
    local host = helper.host_start({}, { server = srv, dir = dir })
    host:wait_log(READY, 20, { plain = true })

    local N = 4
    local originals = {} -- entry id -> {payment_id, data, key}
    for id = 1, N do
      local account = "acct-" .. id
      local data = helper.payment(id, account, 100 * id)
      local entry_id = srv:cli("XADD", "payments", "*", "data", data, "partition-key", account)
      originals[entry_id] = { payment_id = id, data = data, key = account }
    end

    host:wait_records({ msg = "payment posted" }, N, 20, N .. " payments posted after their retry")
    helper.wait_until(function()
      local ids = srv:pending_ids("payments", "ledger")
      return #ids == 0, #ids .. " pending"
    end, 10, "group ledger to have nothing pending")
    helper.wait_until(function()
      local entries = srv:xrange("payments")
      local fraud = srv:group("payments", "fraud")
      return fraud and fraud.pending == 0 and fraud["last-delivered-id"] == entries[#entries].id,
        fraud and cjson.encode(fraud)
    end, 10, "group fraud to have read and acked every entry")
    assert.equal(0, host:stop())
    monitor:stop()

    -- the shared stream holds the originals only; the copies went to ledger's
    -- retry stream (trimmed from it once acknowledged), which fraud never reads
    assert.equal(N, #srv:xrange("payments"))
    local info = assert(srv:call("XINFO", "STREAM", "payments:retry:ledger"))
    assert.equal(N, info["entries-added"])
    assert.equal(0, srv:xlen("payments:retry:fraud"), "fraud's retry stream stays empty")
    local entries = {}
    for _, c in ipairs(monitor:commands()) do
      if c.args[1]:upper() == "XADD" and c.args[2] == "payments:retry:ledger" then
        local fields = {}
        for i = 4, #c.args - 1, 2 do fields[c.args[i]] = c.args[i + 1] end
        entries[#entries + 1] = { fields = fields }
      end
    end
    assert.equal(N, #entries, "copies appended")
    local copied = {}
    for _, e in ipairs(entries) do
      local original_id
      for oid, o in pairs(originals) do
        if o.data == e.fields.data then original_id = oid end
      end
      assert(original_id, "an entry that is no copy of a payment: " .. cjson.encode(e.fields))
      assert(not copied[original_id], "copied twice: " .. original_id)
      copied[original_id] = true
      local o = originals[original_id]
      -- all the original's fields, plus delivery-count and original-id
      local expected = { data = o.data, ["partition-key"] = o.key, ["delivery-count"] = "1", ["original-id"] = original_id }
      for name, value in pairs(expected) do
        assert.equal(value, e.fields[name], "field " .. name .. " of the copy of " .. original_id)
      end
      assert_copied_in_one_transaction(monitor:commands(), original_id, o.data)
    end
    assert.same({}, (srv:pending_ids("payments", "ledger")))
    assert.same({}, (srv:pending_ids("payments:retry:ledger", "ledger")))

    -- the ledger handler saw each payment twice: first delivery, then the copy
    for id = 1, N do
      local seen = host:records({ msg = "payment seen", payment_id = id })
      assert.equal(2, #seen, "deliveries of payment " .. id)
      assert.equal("none", seen[1].delivery_count)
      assert.equal("1", seen[2].delivery_count)
    end

    -- fraud screened the originals only
    local replies = srv:xrange("payments.screened")
    assert.equal(N, #replies)
    local screened = {}
    for _, r in ipairs(replies) do
      local oid = r.fields["original-id"]
      assert(originals[oid], "screened an entry that is not an original payment: " .. tostring(oid))
      assert(not screened[oid], "screened twice: " .. oid)
      screened[oid] = true
    end
    assert.same({}, (srv:pending_ids("payments", "fraud")))
  end)
end)

describe("forged luastream headers on the shared stream", function()
  after_each(helper.cleanup)

  local function group_file(group)
    return string.format([[
local ls = require "luastream"
return {
  stream = "payments", group = %q, max_deliveries = 3, dead_letter = "payments.dead",
  handle = function(payment, ctx)
    ls.log.info("handled", { group = %q, payment_id = payment.id })
  end,
}
]], group, group)
  end

  it("change nothing: two groups each handle every entry exactly once", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["ledger.lua"] = group_file("ledger"), ["fraud.lua"] = group_file("fraud") })
    local host = helper.host_start({}, { server = srv, dir = dir })
    host:wait_log(READY, 20, { plain = true })
    local forged = {
      { "retry-group", "ledger" }, { "retry-group", "typo" }, { "delivery-count", "999" },
      { "original-id", "1-0" }, { "retry-group", "fraud", "delivery-count", "5" },
    }
    srv:cli("XADD", "payments", "*", "data", helper.payment(0, "acme"))
    for i, h in ipairs(forged) do
      srv:cli("XADD", "payments", "*", "data", helper.payment(i, "acme"), unpack(h))
    end
    local N = #forged + 1
    host:wait_records({ msg = "handled", group = "ledger" }, N, 20, "ledger handled every entry")
    host:wait_records({ msg = "handled", group = "fraud" }, N, 20, "fraud handled every entry")
    for _, group in ipairs { "ledger", "fraud" } do
      helper.wait_until(function()
        local ids = srv:pending_ids("payments", group)
        return #ids == 0, #ids .. " pending"
      end, 10, group .. " to have nothing pending")
    end
    assert.equal(0, host:stop())
    for _, group in ipairs { "ledger", "fraud" } do
      local seen = {}
      for _, rec in ipairs(host:records({ msg = "handled", group = group })) do
        seen[rec.payment_id] = (seen[rec.payment_id] or 0) + 1
      end
      for i = 0, N - 1 do assert.equal(1, seen[tostring(i)], group .. ": payment " .. i) end
    end
    assert.equal(0, srv:xlen("payments.dead"), "nothing dead-lettered")
    assert.equal(N, srv:xlen("payments"))
  end)
end)
