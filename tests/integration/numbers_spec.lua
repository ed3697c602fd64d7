-- Numbers and bodies against the real binary and redis-server: a handler
-- replying {amount = m.amount} writes back exactly the digits it was sent
-- (integers above 2^53 as strings of their digits), a number no double can
-- hold and an entry with two `data` fields are dead-lettered with their own
-- reasons (docs/handlers.md, "Numbers"; docs/retries-delays-dead-letters.md).
local helper = require "tests.integration.helper"

local READY = 'msg="host ready"'

local ECHO = [[
local ls = require "luastream"
return {
  stream = "payments", group = "ledger", reply_to = "payments.echo", dead_letter = "payments.dead",
  handle = function(m) return ls.reply({ amount = m.amount }) end,
}
]]

-- body literal -> the reply's data, exactly
local EDGES = {
  { "9007199254740991", '{"amount":9007199254740991}' },
  { "9007199254740992", '{"amount":9007199254740992}' },
  { "9007199254740993", '{"amount":"9007199254740993"}' },
  { "-9007199254740993", '{"amount":"-9007199254740993"}' },
  { "123456789012345", '{"amount":123456789012345}' },
  { "1234567890123456", '{"amount":1234567890123456}' },
  { "12345678901234567", '{"amount":"12345678901234567"}' },
  { "1234567890123456789", '{"amount":"1234567890123456789"}' },
  { "0.1", '{"amount":0.1}' },
  { "1.5", '{"amount":1.5}' },
  { "-0", '{"amount":-0}' },
  { "1e308", '{"amount":' .. string.format("%.0f", 1e308) .. '}' },
}

local function wait_xlen(srv, stream, n)
  helper.wait_until(function()
    local len = srv:xlen(stream)
    return len >= n, len .. " on " .. stream
  end, 20, n .. " entries on " .. stream)
end

describe("numbers", function()
  after_each(helper.cleanup)

  it("come back in the reply stream with the exact digits they were sent with", function()
    local srv = helper.redis_start()
    local host = helper.host_start({}, { server = srv, dir = helper.handlers_dir({ ["echo.lua"] = ECHO }) })
    host:wait_log(READY, 20, { plain = true })
    local want, n = {}, 0
    for _ = 1, 3 do -- the first of a shape through the Lua API, later ones through the FFI
      for _, edge in ipairs(EDGES) do
        want[srv:cli("XADD", "payments", "*", "data", '{"amount":' .. edge[1] .. '}')] = edge
        n = n + 1
      end
    end
    wait_xlen(srv, "payments.echo", n)
    local seen = 0
    for _, e in ipairs(srv:xrange("payments.echo")) do
      local edge = assert(want[e.fields["original-id"]], "a reply to an unknown entry")
      assert.equal(edge[2], e.fields.data, edge[1])
      seen = seen + 1
    end
    assert.equal(n, seen)
    assert.equal(0, srv:xlen("payments.dead"))
    assert.equal(0, host:stop())
  end)

  it("dead-letters numbers out of range and entries with two data fields, each with its reason", function()
    local srv = helper.redis_start()
    local host = helper.host_start({}, { server = srv, dir = helper.handlers_dir({ ["echo.lua"] = ECHO }) })
    host:wait_log(READY, 20, { plain = true })
    local bad = {
      [srv:cli("XADD", "payments", "*", "data", '{"amount":1e400}')] =
        { "number-out-of-range", "Number out of range at character 11: 1e400" },
      [srv:cli("XADD", "payments", "*", "data", '{"amount":-1e400}')] =
        { "number-out-of-range", "Number out of range at character 11: -1e400" },
      [srv:cli("XADD", "payments", "*", "data", '{"amount":1}', "data", '{"amount":2}')] =
        { "duplicate-data", "entry has 2 data fields" },
    }
    local good = srv:cli("XADD", "payments", "*", "data", '{"amount":7}')
    wait_xlen(srv, "payments.dead", 3)
    wait_xlen(srv, "payments.echo", 1)
    for _, e in ipairs(srv:xrange("payments.dead")) do
      local f = e.fields
      local why = assert(bad[f["dead-letter-id"]], "an unexpected dead letter")
      assert.equal(why[1], f["dead-letter-reason"])
      assert.matches(why[2], f["dead-letter-error"], 1, true)
      assert.equal(1, host:count({ msg = "entry dead-lettered", id = f["dead-letter-id"], reason = why[1] }))
    end
    local replies = srv:xrange("payments.echo")
    assert.equal(1, #replies)
    assert.equal(good, replies[1].fields["original-id"])
    assert.equal('{"amount":7}', replies[1].fields.data)
    helper.wait_until(function()
      local ids = srv:pending_ids("payments", "ledger")
      return #ids == 0, #ids .. " pending"
    end, 10, "nothing pending")
    assert.equal(0, host:stop())
  end)

  it("leaves bad input of both kinds pending and logged without a dead_letter stream", function()
    local srv = helper.redis_start()
    local handler = ECHO:gsub(', dead_letter = "payments.dead"', "")
    local host = helper.host_start({}, { server = srv, dir = helper.handlers_dir({ ["echo.lua"] = handler }) })
    host:wait_log(READY, 20, { plain = true })
    local big = srv:cli("XADD", "payments", "*", "data", '{"amount":1e400}')
    local two = srv:cli("XADD", "payments", "*", "data", '{"amount":1}', "data", '{"amount":2}')
    local logged = host:wait_records({ msg = "bad entry left pending" }, 2, 20, "2 bad entries logged")
    local reasons = {}
    for _, rec in ipairs(logged) do reasons[rec.id] = rec.reason end
    assert.same({ [big] = "number-out-of-range", [two] = "duplicate-data" }, reasons)
    local _, pending = srv:pending_ids("payments", "ledger")
    assert(pending[big] and pending[two], "both left pending")
    assert.equal(0, host:stop())
  end)
end)
