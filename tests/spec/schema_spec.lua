-- Message schemas (docs/handlers.md, "Message schemas"): an entry whose body
-- does not match the handler's `schema` never reaches handle; it is
-- dead-lettered with reason `schema` and the first failing path and rule,
-- or, without a dead_letter stream, logged and left pending as any bad
-- input. A reply that does not match `reply_schema` fails the delivery.
-- Bodies are checked on both decoding paths: a shape's first sightings go
-- through core.message, later ones of the same shape through the FFI
-- (luastream_flat), whose record is checked in C.
local testing = require "luastream.testing"
local handler = require "luastream.handler"

local HERE = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") .. "/fixtures"

local function dead_letters(app)
  local dead = {}
  for _, e in ipairs(app:entries("payments.dead")) do dead[e.headers["dead-letter-id"]] = e end
  return dead
end

describe("a handler's schema", function()
  local app
  before_each(function() app = testing.app(HERE .. "/schema", { handler_errors = "record" }) end)
  after_each(function() app:stop() end)

  it("runs the handler on a matching entry, on the FFI path as on the general one", function()
    local ids = {}
    for i = 1, 5 do ids[i] = app:publish("payments", '{"id":' .. i .. ',"account":"acme","amount_cents":500}') end
    local nested = app:publish("payments", { id = "p-1", amount_cents = 0, items = { { sku = "ABC-12" } } })
    local got = app:received("checked")
    assert.equal(6, #got)
    for i, d in ipairs(got) do assert.equal("reply", d.outcome, d.error); assert.equal(ids[i] or nested, d.id) end
    assert.equal(6, #app:entries("payments.checked"))
    assert.is_nil(next(dead_letters(app)))
    assert.equal(nested, got[6].id)
  end)

  it("dead-letters a mismatching entry with reason schema and the path, on both paths", function()
    -- the same shape as the matching ones around it: the FFI path takes the
    -- shape once it is known, and hands a mismatch to core.message
    local cases = {}
    for round = 1, 4 do
      app:publish("payments", '{"id":' .. round .. ',"account":"acme","amount_cents":500}')
      cases[#cases + 1] = { app:publish("payments", '{"id":' .. round .. ',"account":"acme","amount_cents":-1}'),
        "$.amount_cents: must be >= 0" }
      cases[#cases + 1] = { app:publish("payments", '{"id":' .. round .. ',"account":"acme","amount_cents":1.5}'),
        "$.amount_cents: must be an integer, got number" }
      cases[#cases + 1] = { app:publish("payments", '{"id":' .. round .. ',"account":"","amount_cents":1}'),
        "$.account: must be at least 1 characters long, got 0" }
      cases[#cases + 1] = { app:publish("payments", '{"id":' .. round .. ',"account":"acme"}'),
        "$.amount_cents: is required" }
    end
    cases[#cases + 1] = { app:publish("payments", '[1,2]'), "$: must be an object, got array" }
    cases[#cases + 1] = { app:publish("payments", '{"id":1,"amount_cents":1,"items":[{"sku":"ABC-1"},{"sku":"ABC-2"},{"x":1}]}'),
      "$.items[2].sku: is required" }
    cases[#cases + 1] = { app:publish("payments", '{"id":1,"amount_cents":1,"items":[{"sku":"abc-1"}]}'),
      "$.items[0].sku: must match the pattern ^[A-Z]{3}-[0-9]+$" }
    cases[#cases + 1] = { app:publish("payments", '{"id":1,"amount_cents":1,"currency":"GBP"}'),
      '$.currency: must be one of "EUR", "USD"' }
    cases[#cases + 1] = { app:publish("payments", '{"id":true,"amount_cents":1}'),
      "$.id: must be a string or an integer, got boolean" }
    -- an integer literal above 2^53 is an integer (the handler gets its digits)
    local big = app:publish("payments", '{"id":12345678901234567890,"amount_cents":1}')
    local dead = dead_letters(app)
    for _, c in ipairs(cases) do
      local d = assert(dead[c[1]], "no dead letter for " .. c[2])
      assert.equal("schema", d.headers["dead-letter-reason"])
      assert.equal(c[2], d.headers["dead-letter-error"])
    end
    assert.is_nil(dead[big])
    local outcomes = {}
    for _, d in ipairs(app:received("checked")) do outcomes[d.id] = d end
    for _, c in ipairs(cases) do
      assert.equal("invalid", outcomes[c[1]].outcome)
      assert.equal("schema", outcomes[c[1]].reason)
    end
    assert.equal("reply", outcomes[big].outcome)
    assert.same({}, app:pending("payments", "checked"))
    assert.equal(#cases, app:metric("luastream_dead_letters_total",
      { handler = "checked", stream = "payments", group = "checked", reason = "schema" }))
  end)

  it("checks an entry without a data field as its field table, an object of strings", function()
    local ok = app:command("XADD", "payments", "*", "id", "7", "amount_cents", "100")
    app:settle()
    local got = app:received("checked")
    assert.equal(ok, got[1].id)
    assert.equal("invalid", got[1].outcome) -- amount_cents is the string "100", not an integer
    assert.equal("$.amount_cents: must be an integer, got string", got[1].error)
    assert.equal("schema", dead_letters(app)[ok].headers["dead-letter-reason"])
  end)

  it("leaves a body of another content-type to the handler", function()
    local id = app:publish("payments", "not json at all", { headers = { ["content-type"] = "text/plain" } })
    local got = app:received("checked")
    assert.equal(id, got[1].id)
    -- the handler ran on the string: its reply has no id, which reply_schema wants
    assert.equal("error", got[1].outcome)
    assert.equal("ls.reply: the reply does not match reply_schema: $.id: is required", got[1].error)
  end)

  it("fails the delivery when the reply does not match reply_schema", function()
    local id = app:publish("payments", { id = 9, amount_cents = 1, bad_reply = true })
    local got = app:received("checked")
    assert.equal(id, got[1].id)
    assert.equal("error", got[1].outcome)
    assert.equal("bad-return", got[1].reason)
    assert.equal('ls.reply: the reply does not match reply_schema: $.status: must be one of "ok", "held"',
      got[1].error)
    assert.equal(0, app:xlen("payments.checked"))
    assert.equal(1, #app:pending("payments", "checked")) -- an error leaves it pending, as any
  end)
end)

describe("a schema without a dead_letter stream", function()
  it("logs a mismatching entry and leaves it pending, as bad input", function()
    local app = testing.app(HERE .. "/schema_no_dead_letter")
    local bad = app:publish("orders", '{"order":"x"}')
    local good = app:publish("orders", '{"order":1}')
    local got = app:received("unchecked_out")
    assert.equal("invalid", got[1].outcome)
    assert.equal("schema", got[1].reason)
    assert.equal("ack", got[2].outcome)
    local rec = app:records("bad entry left pending")
    assert.equal(1, #rec)
    assert.equal(bad, rec[1].id)
    assert.equal("schema", rec[1].reason)
    assert.equal("$.order: must be an integer, got string", rec[1].error)
    local pending = app:pending("orders", "plain")
    assert.equal(1, #pending)
    assert.equal(bad, pending[1].id)
    assert.not_equal(good, pending[1].id)
    app:stop()
  end)
end)

describe("a schema changed by a reload", function()
  it("applies to the next entries without restarting the subscription", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p '" .. dir .. "'"))
    local function write(minimum)
      local f = assert(io.open(dir .. "/h.lua", "w"))
      f:write(string.format([[
return {
  stream = "s", group = "g",
  schema = { properties = { n = { minimum = %d } } },
  handle = function() end,
}
]], minimum))
      f:close()
    end
    write(0)
    local app = testing.app(dir)
    local before = app:publish("s", '{"n":5}')
    write(10)
    app:reload()
    local after = app:publish("s", '{"n":5}')
    local got = {}
    for _, d in ipairs(app:received("h")) do got[d.id] = d end
    assert.equal("ack", got[before].outcome)
    assert.equal("invalid", got[after].outcome)
    assert.equal("$.n: must be >= 10", got[after].error)
    assert.equal(1, #app:records("handler reloaded")) -- swapped in place
    assert.equal(0, #app:records("handler reloaded, restarting its subscription"))
    app:stop()
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)

describe("validate", function()
  local function refused(schema, extra)
    local t = { stream = "s", group = "g", handle = function() end, schema = schema }
    for k, v in pairs(extra or {}) do t[k] = v end
    local ok, err = pcall(handler.validate, t, "x.lua", "return {\n  schema = {\n    oneOf = 1,\n  },\n}\n")
    assert.is_false(ok)
    return err
  end

  it("keeps the schema tables as the file gave them", function()
    local schema = { type = "object", properties = { id = { type = "integer", description = "the id" } } }
    local spec = handler.validate({ stream = "s", group = "g", handle = function() end, schema = schema,
      reply_to = "r", reply_schema = schema }, "x.lua", "")
    assert.equal(schema, spec.schema)
    assert.equal(schema, spec.reply_schema)
    assert.same({ type = "object", properties = { id = { type = "integer", description = "the id" } } }, spec.schema)
  end)

  it("refuses an unsupported keyword naming file, line, field and path", function()
    local err = refused({ properties = { amount = { oneOf = {} } } })
    assert.matches("^x%.lua:3: field 'schema' at %$%.properties%.amount: keyword 'oneOf' is not supported %(supported: type, ", err)
  end)

  it("refuses bad values of supported keywords", function()
    assert.matches("at %$: minimum must be a number, got string", refused({ minimum = "0" }))
    assert.matches("at %$%.items: pattern /%[/ is not a POSIX extended regular expression", refused({ items = { pattern = "[" } }))
    assert.matches("\\d %(use %[0%-9%]", refused({ pattern = "^\\d+$" }))
    assert.matches("format 'email' is not supported %(supported: date%-time, uuid%)", refused({ format = "email" }))
    assert.matches("type 'float' is not a JSON Schema type", refused({ type = "float" }))
    assert.matches("minLength must be a whole number from 0", refused({ minLength = -1 }))
    assert.matches("not a list", refused({ items = { { type = "string" } } }))
    assert.matches("boolean form of JSON Schema draft 4", refused({ exclusiveMinimum = true }))
    assert.matches("field 'schema' must be a table", refused("object"))
    assert.matches("field 'reply_schema' describes the replies to reply_to, and there is no reply_to",
      refused({}, { reply_schema = {} }))
  end)
end)
