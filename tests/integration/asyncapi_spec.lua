-- `luastream asyncapi DIR`: the AsyncAPI 3.0.0 document of a directory's
-- handlers, checked with the official parser (@asyncapi/parser, which ./dev
-- installs into tests/asyncapi/node_modules from the committed lockfile),
-- in JSON and YAML (the same document), on the payments example and on a
-- broad fixture (tests/integration/fixtures/asyncapi: a shared schema module,
-- a new + reclaim pair of one group, a partitioned claiming reader, replies,
-- dead letters, a reader of another handler's replies, a batch handler, a
-- scheduled handler).
local helper = require "tests.integration.helper"
local cjson = require "cjson"

local ROOT = helper.repo_root
local FIXTURE = ROOT .. "/tests/integration/fixtures/asyncapi"
local VALIDATE = ROOT .. "/tests/asyncapi/validate.mjs"

-- node's verdict on file (and, given, that other holds the same document):
-- exit code and output.
local function validate(file, other)
  local installed = io.open(ROOT .. "/tests/asyncapi/node_modules/@asyncapi/parser/package.json")
  if installed then installed:close() end
  if not installed then
    error("the AsyncAPI parser is not installed in tests/asyncapi/node_modules: ./dev test " ..
      "installs it (npm ci from tests/asyncapi/package-lock.json)", 2)
  end
  local code, out, err = helper.run({ "node", VALIDATE, file, other }, { timeout = 60 })
  return code, out .. err
end

-- `luastream asyncapi ARGS...`: the text written, into a file of its own.
local function asyncapi(...)
  local code, out, err = helper.luastream("asyncapi", ...)
  assert(code == 0, "luastream asyncapi failed (" .. code .. "): " .. err)
  return out, err
end

local function write(dir, name, text)
  local path = dir .. "/" .. name
  helper.write_file(path, text)
  return path
end

-- The JSON and YAML documents of dir (extra arguments first), each valid and
-- the same; the JSON decoded.
local function documents(dir, ...)
  local tmp = helper.tmpdir("asyncapi")
  local args = { ... }
  args[#args + 1] = dir
  local json = asyncapi(args)
  local yaml = asyncapi("--yaml", args)
  local jfile, yfile = write(tmp, "doc.json", json), write(tmp, "doc.yaml", yaml)
  local code, out = validate(jfile, yfile)
  assert(code == 0, "the parser refused the documents:\n" .. out)
  assert.matches("valid AsyncAPI 3.0.0, the same document as", out, 1, true)
  return cjson.decode(json), json, yaml
end

local function names(t)
  local out = {}
  for k in pairs(t) do out[#out + 1] = k end
  table.sort(out)
  return out
end

describe("luastream asyncapi", function()
  after_each(helper.cleanup)

  it("describes the payments example: its stream, both groups and their replies", function()
    local doc = documents(ROOT .. "/handlers")
    assert.are.equal("3.0.0", doc.asyncapi)
    assert.are.equal("luastream handlers in handlers", doc.info.title)
    assert.are.same({ "payments", "payments.posted", "payments.screened", "payments_retry_fraud",
                      "payments_retry_ledger" }, names(doc.channels))
    assert.are.equal("payments", doc.channels.payments.address)
    local post = doc.operations["post_payment.receive"]
    assert.are.equal("receive", post.action)
    assert.are.equal("#/channels/payments", post.channel["$ref"])
    assert.are.equal("#/channels/payments.posted", post.reply.channel["$ref"])
    assert.are.equal("ledger", post["x-luastream-group"])
    assert.are.equal("claiming", post["x-luastream-read"])
    assert.are.equal(30000, post["x-luastream-min-idle-ms"])
    assert.are.equal(true, post["x-luastream-by-key"])
    assert.are.equal("partition-key", post["x-luastream-partition-key-header"])
    local screen = doc.operations["screen_payment.receive"]
    assert.are.equal("fraud", screen["x-luastream-group"])
    assert.are.equal("beginning", screen["x-luastream-start"])
    -- both groups read messages of the stream's channel
    for _, op in ipairs({ post, screen }) do
      assert.are.equal(1, #op.messages)
      assert.matches("^#/channels/payments/messages/", op.messages[1]["$ref"])
    end
    assert.are.equal("payments:retry:ledger", doc.channels.payments_retry_ledger.address)
    assert.are.equal("send", doc.operations["post_payment.retry"].action)
    -- the default server, as `run` has it
    assert.are.same({ "redis" }, names(doc.servers))
    assert.are.equal("127.0.0.1:6379", doc.servers.redis.host)
    assert.are.equal("redis", doc.servers.redis.protocol)
  end)

  it("describes a broad directory: partitions, retries, replies, dead letters, schemas", function()
    local doc, json = documents(FIXTURE)
    assert.are.same({ "events.audited_p", "events.dead_p", "events_p", "events_p_retry_audit",
                      "orders", "orders.billed", "orders.billed_retry_notify", "orders.dead",
                      "orders_retry_billing", "rows", "rows_retry_import" }, names(doc.channels))

    -- the partitioned stream: one channel whose parameter is the hash tag
    local events = doc.channels.events_p
    assert.are.equal("events:{partition_tag}", events.address)
    assert.are.same({ "{0}", "{1}", "{2}", "{3}" }, events.parameters.partition_tag.enum)
    assert.are.equal(4, events["x-luastream-partitions"])
    assert.are.equal("events:{partition_tag}:retry:audit", doc.channels.events_p_retry_audit.address)
    assert.are.equal("events:{partition_tag}:delayed:audit",
      doc.channels.events_p_retry_audit["x-luastream-delay-set"])
    assert.are.equal("events.dead:{partition_tag}", doc.channels["events.dead_p"].address)
    local audit = doc.operations["audit_event.receive"]
    assert.are.equal("claiming", audit["x-luastream-read"])
    assert.are.equal(true, audit["x-luastream-claim-fallback"])
    assert.are.equal(60000, audit["x-luastream-min-idle-ms"])
    assert.are.equal(600000, audit["x-luastream-max-run-ms"])
    assert.are.equal(false, audit["x-luastream-max-deliveries"])
    assert.are.equal(true, audit["x-luastream-trim"])
    assert.are.equal("#/channels/events.audited_p", audit.reply.channel["$ref"])
    -- no schema: any JSON value
    local event_msg = doc.components.messages.events_p
    assert.is_nil(event_msg.payload.type)
    assert.matches("any value", event_msg.payload.description, 1, true)

    -- the new + reclaim pair of one group: one message, one retry stream
    local bill, recover = doc.operations["bill_order.receive"], doc.operations["recover_order.receive"]
    assert.are.same(bill.messages, recover.messages)
    assert.are.equal("new", bill["x-luastream-read"])
    assert.are.equal("reclaim", recover["x-luastream-read"])
    assert.are.equal(120000, recover["x-luastream-min-idle-ms"])
    assert.are.equal(doc.operations["bill_order.retry"].channel["$ref"],
      doc.operations["recover_order.retry"].channel["$ref"])
    assert.are.same({ permits_per_second = 200, burst = 400 }, bill["x-luastream-rate"])
    assert.are.same({ permits_per_second = 5, burst = 1 }, bill["x-luastream-rate-per-key"])
    assert.are.equal(5, bill["x-luastream-max-deliveries"])
    assert.are.equal(10, bill["x-luastream-max-in-flight"])
    assert.are.equal(1, bill["x-luastream-max-in-flight-per-key"])
    assert.are.equal(5, bill["x-luastream-breaker-failures"])
    assert.are.equal(10000, bill["x-luastream-breaker-pause-ms"])
    assert.are.equal(10000, bill["x-luastream-dead-letter-max-len"])

    -- the schema, nested objects, arrays, enums and patterns as written
    local order = doc.components.messages.orders.payload
    assert.are.equal("Order", order.title)
    assert.are.same({ "id", "account", "lines", "currency" }, order.required)
    assert.are.equal(false, order.additionalProperties)
    assert.are.same({ "EUR", "USD", "CHF" }, order.properties.currency.enum)
    assert.are.equal("^acct-[0-9]{4,12}$", order.properties.account.pattern)
    assert.are.equal("uuid", order.properties.id.format)
    assert.are.equal("web", order.properties.source.const)
    local line = order.properties.lines.items
    assert.are.equal(1, order.properties.lines.minItems)
    assert.are.same({ "sku", "quantity", "amount_cents" }, line.required)
    -- a POSIX bracket class, spelt out for JSON Schema's ECMA-262 patterns
    assert.are.equal("^[A-Z]{3}-[0-9]+$", line.properties.sku.pattern)
    assert.are.equal(1, line.properties.quantity.minimum)
    assert.are.same({ { "gift", "rush" } }, order.properties.tags.examples)
    -- the headers luastream reads
    local headers = doc.components.messages.orders.headers.properties
    assert.is_table(headers["partition-key"])
    assert.is_table(headers["content-type"])
    assert.is_table(headers.traceparent)
    -- a retry copy: the same body, delivery-count and original-id required
    local retry = doc.components.messages.orders_retry_billing
    assert.are.same(order, retry.payload)
    assert.are.same({ "delivery-count", "original-id" }, retry.headers.required)

    -- replies: the reply_schema, and a reader's own schema beside it
    local billed = doc.channels["orders.billed"]
    assert.are.same({ "orders.billed", "orders.billed.notify_billed" }, names(billed.messages))
    assert.are.same({ { ["$ref"] = "#/channels/orders.billed/messages/orders.billed" } },
      bill.reply.messages)
    local reply = doc.components.messages["orders.billed"]
    assert.are.equal("^INV-[0-9]+$", reply.payload.properties.invoice.properties.number.pattern)
    assert.are.same({ "original-id" }, reply.headers.required)
    assert.are.same({ "order_id" }, doc.components.messages["orders.billed.notify_billed"].payload.required)

    -- dead letters: provenance headers, the reasons of wire.h
    local dl = doc.components.messages["orders.dead"].headers
    for _, h in ipairs({ "dead-letter-stream", "dead-letter-group", "dead-letter-id",
                         "dead-letter-deliveries", "dead-letter-handler", "dead-letter-reason",
                         "dead-letter-error", "dead-letter-time" }) do
      assert.is_table(dl.properties[h], h)
    end
    local reasons = dl.properties["dead-letter-reason"].enum
    for _, r in ipairs({ "rejected", "max-deliveries", "handler-error", "decode-error", "too-large" }) do
      assert.is_truthy(json:find('"' .. r .. '"', 1, true), r)
    end
    assert.is_truthy(#reasons >= 10)
    assert.are.equal("send", doc.operations["bill_order.dead-letter"].action)
    -- both readers write the same dead letters: one message
    assert.are.same({ "orders.dead" }, names(doc.channels["orders.dead"].messages))

    -- a batch handler: its fields as extensions; none of a scheduled file's
    local rows = doc.operations["import_rows.receive"]
    assert.are.equal(50, rows["x-luastream-batch-max"])
    assert.are.equal(200, rows["x-luastream-batch-wait-ms"])
    assert.is_nil(rows["x-luastream-handle-batch"])
    assert.is_nil(rows["x-luastream-catch-up"])

    -- a scheduled handler: no channel, listed with its schedule
    assert.are.same({ ["x-luastream-handler"] = "nightly_report.lua", ["x-luastream-cron"] = "30 2 * * *",
                      ["x-luastream-tz"] = "Europe/Berlin", ["x-luastream-catch-up"] = false,
                      ["x-luastream-name"] = "nightly_report", ["x-luastream-memory"] = 268435456 },
      doc["x-luastream-scheduled"].nightly_report)
    assert.is_nil(doc.operations["nightly_report.receive"])
  end)

  it("writes the same text each time, keys in a fixed order", function()
    local a, b = asyncapi(FIXTURE), asyncapi(FIXTURE)
    assert.are.equal(a, b)
    local ya, yb = asyncapi("--yaml", FIXTURE), asyncapi("--yaml", FIXTURE)
    assert.are.equal(ya, yb)
    assert.is_truthy(a:find('^{\n  "asyncapi": "3.0.0",\n  "info": {'))
    assert.is_truthy(ya:find('^asyncapi: "3.0.0"\ninfo:\n'))
    -- channels sorted by name
    local first, second = a:find('"events.audited_p": {', 1, true), a:find('"orders": {', 1, true)
    assert.is_truthy(first and second and first < second)
  end)

  it("leaves the password out of the server, and says TLS and AUTH", function()
    local doc, json, yaml = documents(FIXTURE, "--redis", "rediss://bob:s3cret-pw@cache.internal:6390/3",
      "--title", "Billing", "--api-version", "2.1.0")
    assert.is_nil(json:find("s3cret", 1, true))
    assert.is_nil(yaml:find("s3cret", 1, true))
    assert.is_nil(json:find("bob", 1, true))
    local s = doc.servers.redis
    assert.are.equal("cache.internal:6390", s.host)
    assert.are.equal("rediss", s.protocol)
    assert.are.equal("/3", s.pathname)
    assert.are.equal(true, s["x-luastream-tls"])
    assert.are.same({ { ["$ref"] = "#/components/securitySchemes/redisAuth" } }, s.security)
    assert.are.equal("userPassword", doc.components.securitySchemes.redisAuth.type)
    assert.are.equal("Billing", doc.info.title)
    assert.are.equal("2.1.0", doc.info.version)

    -- from REDIS_URL, a Sentinel URL: the sentinels, the service
    local tmp = helper.tmpdir("asyncapi")
    local code, out = helper.luastream("asyncapi", FIXTURE, {
      env = { REDIS_URL = "redis+sentinel://:pw@10.0.0.1:26379,[::1]/mymaster/2" } })
    assert.are.equal(0, code)
    local sdoc = cjson.decode(out)
    assert.are.equal("10.0.0.1:26379,[::1]:26379", sdoc.servers.redis.host)
    assert.are.equal("mymaster", sdoc.servers.redis["x-luastream-sentinel-service"])
    assert.is_nil(out:find("pw@", 1, true))
    local vcode, vout = validate(write(tmp, "sentinel.json", out))
    assert.are.equal(0, vcode, vout)
  end)

  it("names the file that does not load, as check does, and writes nothing", function()
    local dir = helper.handlers_dir({
      ["a_good.lua"] = 'return { stream = "s", group = "g", handle = function() end }\n',
      ["b_bad.lua"] = 'return {\n  stream = "s", group = "h",\n  wokers = 2,\n  handle = function() end,\n}\n',
    })
    local code, out, err = helper.luastream("asyncapi", dir)
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.matches(dir .. "/b_bad.lua:3: unknown field 'wokers'", err, 1, true)
    local _, _, check_err = helper.luastream("check", dir)
    assert.matches(dir .. "/b_bad.lua:3: unknown field 'wokers'", check_err, 1, true)

    -- a schema that holds itself cannot be written
    local loop = helper.handlers_dir({
      ["loop.lua"] = 'local s = { type = "object" }\ns.properties = { next = s }\n' ..
        'return { stream = "s", group = "g", schema = s, handle = function() end }\n',
    })
    code, out, err = helper.luastream("asyncapi", loop)
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.matches(loop .. "/loop.lua", err, 1, true)

    code, out, err = helper.luastream("asyncapi", dir .. "/missing")
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.matches(dir .. "/missing", err, 1, true)

    code, _, err = helper.luastream("asyncapi")
    assert.are.equal(2, code)
    assert.matches("usage: luastream asyncapi", err, 1, true)
  end)

  it("says --help from the option table", function()
    local code, out = helper.luastream("asyncapi", "--help")
    assert.are.equal(0, code)
    assert.matches("AsyncAPI 3.0.0", out, 1, true)
    assert.matches("--yaml", out, 1, true)
    assert.matches("--redis URL", out, 1, true)
    local _, main = helper.luastream("help")
    assert.matches("asyncapi", main, 1, true)
  end)

  it("has a validator that refuses a broken document", function()
    local tmp = helper.tmpdir("asyncapi")
    local json = asyncapi(FIXTURE)
    local broken = json:gsub('"#/components/messages/orders"', '"#/components/messages/nowhere"')
    assert.are_not.equal(json, broken)
    local code, out = validate(write(tmp, "broken.json", broken))
    assert.are_not.equal(0, code)
    assert.matches("nowhere", out, 1, true)
    -- and a YAML that is not the same document
    local yaml = asyncapi("--yaml", FIXTURE):gsub("x%-luastream%-partitions: 4", "x-luastream-partitions: 5")
    code, out = validate(write(tmp, "doc.json", json), write(tmp, "other.yaml", yaml))
    assert.are_not.equal(0, code)
    assert.matches("not the same document", out, 1, true)
  end)
end)
