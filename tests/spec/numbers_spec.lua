-- Numbers through a handler (docs/handlers.md, "Numbers"): what a body's
-- number becomes in the handler and in its reply, on both decoding paths (a
-- body's first sighting is decoded through the Lua API, later ones of the
-- same shape through the FFI), and luastream.json's encoder on its own.
local testing = require "luastream.testing"
local json = require "luastream.json"
local cjson = require("cjson.safe").new()

local HERE = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") .. "/fixtures"

-- body literal -> { the reply's amount as JSON text, the type the handler saw }
local EDGES = {
  { "9007199254740991", "9007199254740991", "number" },        -- 2^53 - 1
  { "9007199254740992", "9007199254740992", "number" },        -- 2^53
  { "9007199254740993", '"9007199254740993"', "string" },      -- 2^53 + 1: a double rounds it
  { "-9007199254740993", '"-9007199254740993"', "string" },
  { "123456789012345", "123456789012345", "number" },          -- 15 digits
  { "1234567890123456", "1234567890123456", "number" },        -- 16 digits, below 2^53
  { "9999999999999999", '"9999999999999999"', "string" },      -- 16 digits, above 2^53
  { "12345678901234567", '"12345678901234567"', "string" },    -- 17 digits
  { "1234567890123456789", '"1234567890123456789"', "string" }, -- 19 digits
  { "-1234567890123456789", '"-1234567890123456789"', "string" },
  { "0.1", "0.1", "number" },
  { "1.5", "1.5", "number" },
  { "-0", "-0", "number" },
  { "1e20", "100000000000000000000", "number" },
  { "2.5e-7", "2.5e-07", "number" },
  { "0.30000000000000004", "0.30000000000000004", "number" },
  { "1e308", string.format("%.0f", 1e308), "number" },
}

describe("numbers through a handler", function()
  local app
  before_each(function() app = testing.app(HERE .. "/echo_amount") end)
  after_each(function() app:stop() end)

  -- The reply's `data` field, exactly as written, for each entry replied to.
  local function replies()
    local out = {}
    for _, e in ipairs(app:entries("payments.echo")) do out[e.headers["original-id"]] = e.fields.data end
    return out
  end

  it("come back as the same number, or as the exact digits of an integer a double cannot hold", function()
    local ids = {}
    for round = 1, 3 do -- a shape's first sightings go through the Lua API, later ones through the FFI
      for i, edge in ipairs(EDGES) do
        ids[#ids + 1] = { app:publish("payments", '{"amount":' .. edge[1] .. ',"n":' .. i .. '}'), edge, round }
      end
    end
    local got = replies()
    for _, r in ipairs(ids) do
      local id, edge = r[1], r[2]
      local want = '{"amount":' .. edge[2] .. ',"kind":"' .. edge[3] .. '"}'
      local data = got[id]
      assert(data, edge[1] .. ": no reply")
      -- pairs() order is Lua's: compare the decoded reply and the amount's text
      local amount = data:match('"amount":(%-?[%w%.%+"%-]+)')
      assert.equal(edge[2], amount, edge[1] .. " (round " .. r[3] .. "): " .. data)
      assert.same(cjson.decode(want), cjson.decode(data))
    end
  end)

  it("dead-letters a number no double can hold as number-out-of-range, without calling the handler", function()
    local big = app:publish("payments", '{"amount":1e400}')
    local small = app:publish("payments", '{"amount":-1e400,"id":"p-1"}')
    local ok = app:publish("payments", '{"amount":1e308}')
    local dead = {}
    for _, e in ipairs(app:entries("payments.dead")) do dead[e.headers["dead-letter-id"]] = e end
    for _, id in ipairs({ big, small }) do
      local d = assert(dead[id], "no dead letter for " .. id)
      assert.equal("number-out-of-range", d.headers["dead-letter-reason"])
      assert.matches("Number out of range at character 11: %-?1e400", d.headers["dead-letter-error"])
    end
    for _, got in ipairs(app:received("echo_amount")) do
      if got.id ~= ok then
        assert.equal("invalid", got.outcome)
        assert.equal("number-out-of-range", got.reason)
      end
    end
    assert.equal(1, app:xlen("payments.echo"))
    assert.same({}, app:pending("payments", "ledger"))
  end)

  it("dead-letters an entry with two data fields as duplicate-data, without calling the handler", function()
    local id = assert(app:command("XADD", "payments", "*", "data", '{"amount":1}', "data", '{"amount":2}'))
    app:settle()
    local dead = app:entries("payments.dead")
    assert.equal(1, #dead)
    assert.equal(id, dead[1].headers["dead-letter-id"])
    assert.equal("duplicate-data", dead[1].headers["dead-letter-reason"])
    assert.equal("entry has 2 data fields: which one is the body cannot be known",
      dead[1].headers["dead-letter-error"])
    assert.equal(0, app:xlen("payments.echo"))
    assert.equal("duplicate-data", app:received("echo_amount")[1].reason)
  end)
end)

describe("luastream.json.encode", function()
  local cases = {
    { 2 ^ 53 - 1, "9007199254740991" }, { 2 ^ 53, "9007199254740992" }, { 2 ^ 53 + 2, "9007199254740994" },
    { -(2 ^ 53 + 2), "-9007199254740994" }, { 123456789012345, "123456789012345" },
    { 1234567890123456, "1234567890123456" }, { 12345678901234567, "12345678901234568" },
    { 2 ^ 63, "9223372036854775808" }, { -2 ^ 63, "-9223372036854775808" }, { 2 ^ 64, "18446744073709551616" },
    { 1e20, "100000000000000000000" }, { 1e23, "99999999999999991611392" },
    { 0, "0" }, { -0.0, "-0" }, { 0.1, "0.1" }, { 1.5, "1.5" }, { -2.25, "-2.25" }, { 0.1 + 0.2, "0.30000000000000004" },
    { 1 / 3, "0.3333333333333333" }, { 1e-7, "1e-07" }, { 5e-324, "4.94065645841247e-324" },
    { 123456.789, "123456.789" }, { 1234567890123.5, "1234567890123.5" },
  }

  it("writes integers as integers and other numbers with the fewest digits that read back the same", function()
    for _, c in ipairs(cases) do
      local text = assert(json.encode(c[1]))
      assert.equal(c[2], text, ("%.17g"):format(c[1]))
      local back = assert(tonumber(text))
      assert(back == c[1] and 1 / back == 1 / c[1], text .. " reads back as another number")
    end
    assert.equal(309, #json.encode(1e308))
    assert.equal(1e308, tonumber(json.encode(1e308)))
    assert.equal('{"a":[1,123456789012345,0.1]}', json.encode({ a = { 1, 123456789012345, 0.1 } }))
    assert.equal('{"0.1":1}', json.encode({ [0.1] = 1 }))
  end)

  it("refuses NaN and infinities", function()
    for _, v in ipairs({ 0 / 0, 1 / 0, -1 / 0 }) do
      local text, err = json.encode({ amount = v })
      assert.is_nil(text)
      assert.equal("Cannot serialise number: must not be NaN or Inf", err)
    end
  end)

  it("writes everything else as lua-cjson does", function()
    local values = {
      "", "pay", "a/b\"c\\d\0\1\31\127\200\n\r\t\b\f", { 1, 2, json.null, 4 }, { [1] = 1, [3] = 3 },
      {}, { a = { b = { c = {} } } }, { true, false }, json.null, { [1] = "x", [10] = "y" },
      { id = "p-1", amount_cents = 1234, tags = { "a", "b" }, ok = true },
    }
    for _, v in ipairs(values) do
      assert.equal(cjson.encode(v), json.encode(v))
    end
    for _, v in ipairs({ function() end, { [true] = 1 }, { [1] = 1, [11] = 2 }, coroutine.create(print) }) do
      local text, err = json.encode(v)
      local _, want = cjson.encode(v)
      assert.is_nil(text)
      assert.equal(want, err)
    end
    local deep = {}
    local t = deep
    for _ = 1, 1000 do t[1] = {}; t = t[1] end
    assert.same({ nil, "Cannot serialise, excessive nesting (1001)" }, { json.encode(deep) })
  end)
end)
