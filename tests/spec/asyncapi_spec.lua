-- luastream.asyncapi on literal specs: the document's shape, its key order,
-- and the JSON and YAML writers (the binary and the official parser are
-- tests/integration/asyncapi_spec.lua's).
local asyncapi = require "luastream.asyncapi"

local HEADERS = {
  DATA = "data", PARTITION_KEY = "partition-key", DELIVERY_COUNT = "delivery-count",
  IDLE_MS = "idle-ms", RETRY_GROUP = "retry-group", ORIGINAL_ID = "original-id",
  CONTENT_TYPE = "content-type", HANDLER_VERSION = "handler-version",
  DL_STREAM = "dead-letter-stream", DL_GROUP = "dead-letter-group", DL_ID = "dead-letter-id",
  DL_DELIVERIES = "dead-letter-deliveries", DL_HANDLER = "dead-letter-handler",
  DL_REASON = "dead-letter-reason", DL_ERROR = "dead-letter-error", DL_TIME = "dead-letter-time",
  DL_CUT = "dead-letter-cut", TRACEPARENT = "traceparent",
}

local function opts(extra)
  local o = { title = "t", version = "1.0.0", dir = "handlers", headers = HEADERS,
              reasons = { "rejected", "handler-error" } }
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

local function spec(t)
  local s = { read = "new", by_key = false, batch = 100, max_deliveries = 10, start = "new" }
  for k, v in pairs(t) do s[k] = v end
  return s
end

describe("luastream.asyncapi", function()
  describe("document", function()
    it("makes a channel per key and operations per handler", function()
      local doc = asyncapi.document({
        { file = "a.lua", name = "a", spec = spec({ stream = "s", group = "g", reply_to = "r",
                                                     dead_letter = "d" }) },
      }, opts())
      local ch = {}
      for id, c in pairs(doc.channels) do ch[id] = c.address end
      assert.are.same({ s = "s", r = "r", d = "d", s_retry_g = "s:retry:g" }, ch)
      local ops = {}
      for id, op in pairs(doc.operations) do ops[id] = op.action end
      assert.are.same({ ["a.receive"] = "receive", ["a.receive-retry"] = "receive",
                        ["a.retry"] = "send", ["a.dead-letter"] = "send" }, ops)
      assert.are.equal("#/channels/r", doc.operations["a.receive"].reply.channel["$ref"])
      assert.is_nil(doc.servers)
    end)

    it("gives a reader without a schema the one its stream's other readers declare", function()
      local schema = { type = "object", required = { "id" } }
      local doc = asyncapi.document({
        { file = "a.lua", name = "a", spec = spec({ stream = "s", group = "g1" }) },
        { file = "b.lua", name = "b", spec = spec({ stream = "s", group = "g2", schema = schema }) },
      }, opts())
      assert.are.same(doc.operations["a.receive"].messages, doc.operations["b.receive"].messages)
      assert.are.same({ "id" }, doc.components.messages.s.payload.required)
      assert.are.same({ "id" }, doc.components.messages.s_retry_g1.payload.required)
      -- two readers declaring two schemas: two messages, each its own
      doc = asyncapi.document({
        { file = "a.lua", name = "a", spec = spec({ stream = "s", group = "g1", schema = { type = "array" } }) },
        { file = "b.lua", name = "b", spec = spec({ stream = "s", group = "g2", schema = schema }) },
        { file = "c.lua", name = "c", spec = spec({ stream = "s", group = "g3" }) },
      }, opts())
      assert.are.equal("#/channels/s/messages/s", doc.operations["a.receive"].messages[1]["$ref"])
      assert.are.equal("#/channels/s/messages/s.b", doc.operations["b.receive"].messages[1]["$ref"])
      assert.are.equal("#/channels/s/messages/s.c", doc.operations["c.receive"].messages[1]["$ref"])
      assert.is_nil(doc.components.messages["s.c"].payload.type)
    end)

    it("says every other field as x-luastream-<field>, durations in ms", function()
      local doc = asyncapi.document({
        { file = "a.lua", name = "a", spec = spec({ stream = "s", group = "g", min_idle = 5000,
          batch_wait = 20, batch_max = 50, some_new_field = "x", handle_batch = function() end,
          version = "0123abcd" }) },
      }, opts())
      local op = doc.operations["a.receive"]
      assert.are.equal(5000, op["x-luastream-min-idle-ms"])
      assert.are.equal(20, op["x-luastream-batch-wait-ms"])
      assert.are.equal(50, op["x-luastream-batch-max"])
      assert.are.equal("x", op["x-luastream-some-new-field"])
      assert.is_nil(op["x-luastream-handle-batch"])
      assert.is_nil(op["x-luastream-version"]) -- the file's hash: changes with any edit
    end)

    it("lists files without a stream (scheduled handlers) apart", function()
      local doc = asyncapi.document({
        { file = "tick.lua", name = "tick", spec = { every = 300000, tick = function() end } },
      }, opts())
      assert.are.same({ tick = { ["x-luastream-handler"] = "tick.lua", ["x-luastream-every-ms"] = 300000 } },
        doc["x-luastream-scheduled"])
      assert.is_nil(next(doc.channels))
    end)

    it("says of each kind of file only the fields that kind has", function()
      local real = package.loaded["luastream.handler_spec"]
      package.loaded["luastream.handler_spec"] = { FIELDS = {
        { "stream" }, { "batch" }, { "every", schedule = true }, { "catch_up", schedule = true },
        { "memory", both = true } } }
      local ok, doc = pcall(asyncapi.document, {
        { file = "tick.lua", name = "tick", spec = { every = 60000, batch = 100, memory = 1, catch_up = false,
                                                     breaker_pause = 30000 } },
        { file = "a.lua", name = "a", spec = spec({ stream = "s", group = "g", memory = 2, catch_up = false }) },
      }, opts())
      package.loaded["luastream.handler_spec"] = real
      assert(ok, doc)
      assert.are.same({ ["x-luastream-handler"] = "tick.lua", ["x-luastream-every-ms"] = 60000,
                        ["x-luastream-memory"] = 1, ["x-luastream-catch-up"] = false },
        doc["x-luastream-scheduled"].tick)
      -- and of a stream handler, not the fields of scheduled files
      assert.are.equal(2, doc.operations["a.receive"]["x-luastream-memory"])
      assert.are.equal(100, doc.operations["a.receive"]["x-luastream-batch"])
      assert.is_nil(doc.operations["a.receive"]["x-luastream-catch-up"])
    end)

    it("keeps ids apart when two keys clean up to the same name", function()
      local doc = asyncapi.document({
        { file = "a.lua", name = "a", spec = spec({ stream = "x:y", group = "g" }) },
        { file = "b.lua", name = "b", spec = spec({ stream = "x_y", group = "g" }) },
      }, opts())
      assert.are.equal("x:y", doc.channels.x_y.address)
      assert.are.equal("x_y", doc.channels.x_y_2.address)
    end)

    it("names the file whose schema JSON cannot hold", function()
      assert.has_error(function()
        asyncapi.document({ { path = "dir/a.lua", file = "a.lua", name = "a",
                              spec = spec({ stream = "s", group = "g", schema = { examples = { 0 / 0 } } }) } }, opts())
      end, "dir/a.lua: field 'schema': a number that JSON cannot hold: nan")
    end)

    it("describes the server without credentials", function()
      local doc = asyncapi.document({}, opts({ server = { host = "h:1", db = 0, tls = true,
                                                          password = true, client_cert = true } }))
      local s = doc.servers.redis
      assert.are.equal("rediss", s.protocol)
      assert.is_nil(s.pathname)
      assert.are.equal(2, #s.security)
      assert.are.equal("X509", doc.components.securitySchemes.redisClientCert.type)
    end)
  end)

  describe("json", function()
    it("writes AsyncAPI's fields first, names sorted, numbers exact", function()
      local text = asyncapi.json({ zeta = 1, asyncapi = "3.0.0", info = { version = "1", title = "t" },
                                   n = { 0.1, 2 ^ 53, -0.5, 1e20 } })
      assert.are.equal('{\n  "asyncapi": "3.0.0",\n  "info": {\n    "title": "t",\n    "version": "1"\n  },\n' ..
        '  "n": [\n    0.1,\n    9007199254740992,\n    -0.5,\n    100000000000000000000\n  ],\n  "zeta": 1\n}\n', text)
    end)

    it("escapes what JSON needs and keeps / as it is", function()
      assert.are.equal('"a\\"b\\\\c\\n\\u0001/"\n', asyncapi.json('a"b\\c\n\1/'))
    end)

    it("writes marked arrays and maps as such, even empty", function()
      assert.are.equal('{\n  "a": [],\n  "m": {}\n}\n', asyncapi.json({ a = asyncapi.array(), m = asyncapi.map() }))
      -- a map's keys are names: sorted, even those AsyncAPI ranks
      assert.are.equal('{\n  "b": 1,\n  "type": 2\n}\n', asyncapi.json(asyncapi.map({ type = 2, b = 1 })))
    end)

    it("refuses numbers JSON cannot hold", function()
      assert.has_error(function() asyncapi.json({ x = 0 / 0 }) end, "a number that JSON cannot hold: nan")
      assert.has_error(function() asyncapi.json({ x = math.huge }) end)
    end)
  end)

  describe("yaml", function()
    it("quotes what a YAML reader would take for something else", function()
      local text = asyncapi.yaml(asyncapi.map({
        plain = "payments.posted", yes = "yes", no = "No", null = "null", num = "3.0.0",
        colon = "a: b", hash = "x #y", lead = " x", empty = "", brace = "{0}", star = "*x",
        dash = "- x", multi = "a\nb", ref = "$ref",
      }))
      assert.are.equal(table.concat({
        'brace: "{0}"', 'colon: "a: b"', 'dash: "- x"', 'empty: ""', 'hash: "x #y"', 'lead: " x"',
        'multi: "a\\nb"', '"no": "No"', '"null": "null"', 'num: "3.0.0"', 'plain: payments.posted',
        'ref: "$ref"', 'star: "*x"', '"yes": "yes"', '' }, "\n"), text)
    end)

    it("writes nested maps and lists in block style", function()
      local text = asyncapi.yaml({
        info = { title = "t" },
        list = { { a = 1, b = { true, false } }, "x", asyncapi.array() },
        none = asyncapi.map(),
      })
      assert.are.equal(table.concat({
        "info:", "  title: t", "list:", "  - a: 1", "    b:", "      - true", "      - false",
        "  - x", "  - []", "none: {}", "" }, "\n"), text)
    end)
  end)

  describe("ecma_pattern", function()
    it("spells out POSIX bracket classes and escapes what ECMA-262 reads otherwise", function()
      local cases = {
        ["^acct-[0-9]{4,12}$"] = "^acct-[0-9]{4,12}$",
        ["^[[:digit:]]+$"] = "^[0-9]+$",
        ["[[:alnum:]_]+"] = "[A-Za-z0-9_]+",
        ["[^[:space:]]"] = "[^ \\t\\n\\r\\f\\v]",
        ["[]a]"] = "[\\]a]",
        ["[\\]"] = "[\\\\]",
        ["a\\.b|c"] = "a\\.b|c",
        ["[a-z[:digit:]-]"] = "[a-z0-9-]",
      }
      for posix, ecma in pairs(cases) do assert.are.equal(ecma, asyncapi.ecma_pattern(posix), posix) end
    end)

    it("is applied to a schema's patterns, at any depth", function()
      local s = asyncapi.schema({ properties = { a = { pattern = "[[:digit:]]" } },
                                  items = { additionalProperties = { pattern = "^[[:lower:]]+$" } } })
      assert.are.equal("[0-9]", s.properties.a.pattern)
      assert.are.equal("^[a-z]+$", s.items.additionalProperties.pattern)
    end)
  end)

  describe("schema", function()
    it("keeps lists as lists and names as names", function()
      local s = asyncapi.schema({ type = "object", required = {}, properties = { type = { enum = {} } },
                                  items = { type = "string" } })
      assert.are.equal('{\n  "type": "object",\n  "properties": {\n    "type": {\n      "enum": []\n    }\n  },\n' ..
        '  "required": [],\n  "items": {\n    "type": "string"\n  }\n}\n', asyncapi.json(s))
    end)
  end)
end)
