-- Message schemas with the built binary and a real server
-- (docs/handlers.md, "Message schemas"): `luastream check` refuses a schema
-- it cannot check, naming file, line and field; `luastream publish --check
-- DIR` adds only bodies the schemas of DIR's handlers for the stream take;
-- `luastream run` dead-letters an entry that does not match, with reason
-- schema, and hands the others to the handler.
local helper = require "tests.integration.helper"

local SCREEN = [[
local ls = require "luastream"

return {
  stream = "payments", group = "fraud", start = "beginning",
  dead_letter = "payments.dead",
  schema = {
    type = "object",
    required = { "id", "amount_cents" },
    properties = {
      id = { type = "integer" },
      amount_cents = { type = "integer", minimum = 0 },
    },
  },
  handle = function(payment)
    ls.log.info("payment screened", { payment_id = payment.id })
  end,
}
]]

-- Another stream's handler: its schema says nothing of payments.
local ORDERS = [[
return {
  stream = "orders", group = "shipping",
  schema = { type = "object", required = { "order" } },
  handle = function() end,
}
]]

-- A partitioned handler: it reads pays:{0} ... pays:{3}.
local PAYS = [[
return {
  stream = "pays", group = "ledger", partitions = 4,
  schema = { type = "object", required = { "id" } },
  handle = function() end,
}
]]

-- A scheduled handler: it reads no stream.
local TICK = [[
return { every = "5m", tick = function() end }
]]

local BAD = [[
return {
  stream = "payments", group = "bad",
  schema = {
    type = "object",
    properties = {
      amount = {
        oneOf = { { type = "integer" } },
      },
    },
  },
  handle = function() end,
}
]]

describe("message schemas", function()
  after_each(helper.cleanup)

  it("check refuses an unsupported keyword with file, line, field and where", function()
    local dir = helper.handlers_dir({ ["bad.lua"] = BAD })
    local code, _, stderr = helper.luastream("check", dir)
    assert.equal(1, code)
    assert.matches(dir .. "/bad.lua:" .. helper.line_of(BAD, "oneOf") ..
      ": field 'schema' at $.properties.amount: keyword 'oneOf' is not supported (supported: type, properties",
      stderr, 1, true)
  end)

  it("publish --check adds a matching body and refuses one a subscriber's schema refuses", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["screen.lua"] = SCREEN, ["orders.lua"] = ORDERS, ["tick.lua"] = TICK })
    local code, stdout, stderr = helper.luastream("publish", "--redis", srv.url, "--check", dir,
      "payments", '{"id":1,"amount_cents":500}')
    assert.equal(0, code, stderr)
    assert.matches("^%d+%-%d+$", helper.trim(stdout))
    code, stdout, stderr = helper.luastream("publish", "--redis", srv.url, "--check", dir,
      "payments", '{"id":2,"amount_cents":-5}')
    assert.equal(1, code)
    assert.equal("", helper.trim(stdout))
    assert.equal("publish: refused: " .. dir .. "/screen.lua: $.amount_cents: must be >= 0", helper.trim(stderr))
    assert.equal(1, srv:xlen("payments"))
    -- a partitioned stream's partitions are checked against its base name
    local _
    code, _, stderr = helper.luastream("publish", "--redis", srv.url, "--check", dir, "--key", "k",
      "--partitions", "4", "payments", '{"id":"x","amount_cents":1}')
    assert.equal(1, code)
    assert.matches("$.id: must be an integer, got string", stderr, 1, true)
    -- a body that is not JSON for the host (its content-type says so) is not checked, as run does not
    code, stdout, stderr = helper.luastream("publish", "--redis", srv.url, "--check", dir,
      "--header", "content-type=text/plain", "payments", '"-5"')
    assert.equal(0, code, stderr)
    assert.matches("^%d+%-%d+$", helper.trim(stdout))
    assert.matches("content-type text/plain is not JSON", stderr, 1, true)
    code, _, stderr = helper.luastream("publish", "--redis", srv.url, "--check", dir,
      "--header", "content-type=application/json", "payments", '"-5"')
    assert.equal(1, code)
    assert.matches("$: must be an object, got string", stderr, 1, true)
    assert.equal(2, srv:xlen("payments"))
    -- a directory with a bad handler file: nothing is added
    local bad = helper.handlers_dir({ ["bad.lua"] = BAD })
    code, _, stderr = helper.luastream("publish", "--redis", srv.url, "--check", bad,
      "payments", '{"id":3,"amount_cents":1}')
    assert.equal(2, code)
    assert.matches("1 handler file with problems: nothing was added", stderr, 1, true)
    assert.equal(2, srv:xlen("payments"))
  end)

  it("publish --check to a partition's key checks the body against the partitioned handler's schema", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["pays.lua"] = PAYS })
    local code, stdout, stderr = helper.luastream("publish", "--redis", srv.url, "--check", dir,
      "pays:{2}", '{"amount_cents":1}')
    assert.equal(1, code)
    assert.equal("", helper.trim(stdout))
    assert.equal("publish: refused: " .. dir .. "/pays.lua: $.id: is required", helper.trim(stderr))
    assert.equal(0, srv:xlen("pays:{2}"))
    code, stdout, stderr = helper.luastream("publish", "--redis", srv.url, "--check", dir,
      "pays:{3}", '{"id":1}')
    assert.equal(0, code, stderr)
    assert.matches("^%d+%-%d+$", helper.trim(stdout))
    assert.equal(1, srv:xlen("pays:{3}"))
    -- keys no partition of the handler has: not its stream, said so, and added
    for _, key in ipairs({ "pays:{4}", "pays:{02}", "pays:{x}", "pays:{1", "paysx:{1}" }) do
      code, _, stderr = helper.luastream("publish", "--redis", srv.url, "--check", dir, key, '{"amount_cents":1}')
      assert.equal(0, code, key .. ": " .. stderr)
      assert.matches("no handler file there reads " .. key .. " with a schema", stderr, 1, true)
    end
  end)

  it("run dead-letters an entry that does not match with reason schema, and runs the others", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["screen.lua"] = SCREEN })
    local bad = srv:call("XADD", "payments", "*", "data", '{"id":1,"amount_cents":-1}')
    srv:call("XADD", "payments", "*", "data", '{"id":2,"amount_cents":1}')
    local host = helper.host_start({}, { server = srv, dir = dir })
    host:wait_log('msg="payment screened"', 20, { plain = true })
    host:wait_log('msg="entry dead-lettered"', 20, { plain = true })
    local dead = srv:xrange("payments.dead")
    assert.equal(1, #dead)
    assert.equal("schema", dead[1].fields["dead-letter-reason"])
    assert.equal("$.amount_cents: must be >= 0", dead[1].fields["dead-letter-error"])
    assert.equal(bad, dead[1].fields["dead-letter-id"])
    assert.equal(0, host:stop())
  end)
end)
