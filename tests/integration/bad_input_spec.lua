-- Bad input and failing handlers: the entry is logged with its stream, group
-- and id and left pending (not acked), and the host goes on with the next one.
local helper = require "tests.integration.helper"

local READY = 'msg="host ready"'
local POSTED = { msg = "payment posted" }

local HANDLER = [[
local ls = require "luastream"

return {
  stream = "payments", group = "ledger", start = "beginning",
  max_body = 100,
  handle = function(payment, ctx)
    if payment.account == "boom" then
      error("cannot post to account boom")
    end
    ls.log.info("payment posted", { payment_id = payment.id })
  end,
}
]]

-- A valid JSON payment of exactly `size` bytes.
local function padded_payment(id, size)
  local head = string.format('{"id":%d,"account":"acme","amount_cents":500,"note":"', id)
  local body = head .. string.rep("x", size - #head - 2) .. '"}'
  assert(#body == size)
  return body
end

local function start(srv)
  local dir = helper.handlers_dir({ ["post_small.lua"] = HANDLER })
  local host = helper.host_start({}, { server = srv, dir = dir })
  host:wait_log(READY, 20, { plain = true })
  return host
end

local function xadd(srv, ...) return srv:cli("XADD", "payments", "*", ...) end

describe("bad input", function()
  after_each(helper.cleanup)

  it("logs undecodable, too large and empty entries with stream, group and id, and leaves them pending", function()
    local srv = helper.redis_start()
    local host = start(srv)

    local ok1 = xadd(srv, "data", helper.payment(1, "acme", 500), "partition-key", "acme")
    local bad = {
      [xadd(srv, "data", "{not json")] = "decode-error",
      [xadd(srv, "data", padded_payment(90, 200), "partition-key", "acme")] = "too-large",
      [xadd(srv, "partition-key", "acme")] = "no-fields",
    }
    local ok2 = xadd(srv, "data", helper.payment(2, "acme", 500), "partition-key", "acme")

    host:wait_records(POSTED, 2, 20, "both good payments posted")
    local logged = host:wait_records({ msg = "bad entry left pending" }, 3, 20, "3 bad entries logged")
    assert.equal(3, #logged)
    for _, rec in ipairs(logged) do
      assert(bad[rec.id], "logged an entry that is not bad: " .. rec._line)
      assert.equal("error", rec.level)
      assert.equal("payments", rec.stream)
      assert.equal("ledger", rec.group)
      assert.equal(bad[rec.id], rec.reason, rec._line)
    end
    local posted = host:records(POSTED)
    assert.same({ "1", "2" }, { posted[1].payment_id, posted[2].payment_id })

    -- the bad ones stay pending, the good ones are acked
    helper.wait_until(function()
      local _, pending = srv:pending_ids("payments", "ledger")
      return not pending[ok1] and not pending[ok2], "good entries still pending"
    end, 10, "the good entries to be acked")
    local list, pending = srv:pending_ids("payments", "ledger")
    assert.equal(3, #list)
    for id in pairs(bad) do assert(pending[id], "bad entry " .. id .. " is not pending") end
    assert.is_true(host:alive())
    assert.equal(0, host:stop())
  end)

  it("logs a handler's error with its traceback, leaves the entry pending and handles the next", function()
    local srv = helper.redis_start()
    local host = start(srv)
    local line = helper.line_of(HANDLER, 'error("cannot post')

    local failing = xadd(srv, "data", helper.payment(3, "boom", 500), "partition-key", "boom")
    xadd(srv, "data", helper.payment(4, "acme", 500), "partition-key", "acme")

    local failed = host:wait_records({ msg = "handler failed, entry left pending" }, 1, 20, "the handler failure logged")[1]
    assert.equal("error", failed.level)
    assert.equal("post_small", failed.handler)
    assert.equal("payments", failed.stream)
    assert.equal("ledger", failed.group)
    assert.equal(failing, failed.id)
    assert.matches("post_small.lua:" .. line .. ":", failed.error, 1, true)
    assert.matches("cannot post to account boom", failed.error, 1, true)
    assert.matches("traceback", failed.error:lower(), 1, true)

    local posted = host:wait_records(POSTED, 1, 20, "the next payment posted")
    assert.equal("4", posted[1].payment_id)
    helper.wait_until(function()
      local list = srv:pending_ids("payments", "ledger")
      return #list == 1 and list[1] == failing, table.concat(list, ",")
    end, 10, "only the failed entry pending")
    assert.equal(1, #host:records({ msg = "handler failed, entry left pending" }))
    assert.is_true(host:alive())
    assert.equal(0, host:stop())
  end)
end)
