-- What a handler sees and writes: the ready line, ls.log's logfmt format, ctx
-- (headers, id, stream, group, consumer), ctx:publish, and entries without `data`.
local helper = require "tests.integration.helper"
local cjson = require "cjson"

local READY = 'msg="host ready"'

local HANDLER = [[
local ls = require "luastream"

return {
  stream = "payments", group = "ledger",
  handle = function(payment, ctx)
    if payment.kind == "fields" then
      ls.log.info("fields entry", { id = payment.id, account = payment.account, data_type = type(payment) })
      return
    end
    ls.log.info("payment posted", { payment_id = payment.id, account = payment.account, note = "two words" })
    ls.log.warn("context", {
      entry_id = ctx.id, stream = ctx.stream, group = ctx.group, consumer = ctx.consumer,
      key = ctx.headers[ls.PARTITION_KEY_HEADER], source = ctx.headers.source,
      count = ctx.headers[ls.DELIVERY_COUNT_HEADER] or "none",
    })
    local queued = ctx:publish("audit", { payment_id = payment.id }, { key = payment.account, headers = { origin = "ctx" } })
    ls.log.info("audited", { queued = queued })
  end,
}
]]

describe("handler context and logs", function()
  after_each(helper.cleanup)

  -- Called by each test rather than before_each: a test skips (no
  -- redis-server installed) only from its own body.
  local srv, host
  local function start()
    srv = helper.redis_start()
    host = helper.host_start({}, { server = srv, dir = helper.handlers_dir({ ["fmt.lua"] = HANDLER }) })
  end

  it("logs host ready with the server and its version", function()
    start()
    local _, rec = host:wait_log(READY, 20, { plain = true })
    assert.equal("info", rec.level)
    assert.equal(srv.url, rec.redis)
    assert.equal(srv:cli("INFO", "server"):match("redis_version:([%d%.]+)"), rec.version)
    assert.equal(1, host:count({ msg = "host ready" }))
  end)

  it("gives the handler its context, formats its log fields and publishes from ctx", function()
    start()
    host:wait_log(READY, 20, { plain = true })
    local id = helper.publish(srv, "payments", helper.payment(7, "acme", 500), { key = "acme", headers = { "source=spec" } })

    -- fields: `id`/`*_id` first, then alphabetical
    local posted = host:wait_log('msg="payment posted"', 20, { plain = true })
    -- then the script version the host adds (hot reload)
    assert.matches(' level=info handler=fmt msg="payment posted" payment_id=7 account=acme note="two words" version=%x+$', posted)

    local ctx = host:wait_records({ msg = "context" }, 1, 20, "the context line")[1]
    assert.equal("warn", ctx.level)
    assert.equal(id, ctx.entry_id)
    assert.equal("payments", ctx.stream)
    assert.equal("ledger", ctx.group)
    local p = io.popen("hostname")
    local me = helper.trim(p:read("*a"))
    p:close()
    assert.equal(me .. "-fmt", ctx.consumer)
    assert.equal("acme", ctx.key)
    assert.equal("spec", ctx.source)
    assert.equal("none", ctx.count)

    -- ctx:publish returns true: the entry is written with the ack, in one script call
    assert.equal("true", host:wait_records({ msg = "audited" }, 1, 20, "ctx:publish called")[1].queued)
    helper.wait_until(function() return srv:xlen("audit") == 1 end, 20, "the audit entry written with the ack")
    local audit = srv:xrange("audit")
    assert.equal(1, #audit)
    assert.same({ payment_id = 7 }, cjson.decode(audit[1].fields.data))
    assert.equal("acme", audit[1].fields["partition-key"])
    assert.equal("ctx", audit[1].fields.origin)
    assert.equal(0, host:stop())
  end)

  it("delivers an entry without data as its field table", function()
    start()
    host:wait_log(READY, 20, { plain = true })
    srv:cli("XADD", "payments", "*", "kind", "fields", "id", "9", "account", "acme")
    local rec = host:wait_records({ msg = "fields entry" }, 1, 20, "the fields entry handled")[1]
    assert.equal("9", rec.id)
    assert.equal("acme", rec.account)
    assert.equal("table", rec.data_type)
    assert.equal(0, host:stop())
    assert.same({}, (srv:pending_ids("payments", "ledger")))
  end)
end)
