-- ls.redis.call and ls.redis.pcall (docs/handlers.md, "Calling Redis") on the
-- in-memory broker: replies as Redis scripting converts them, error replies
-- raised or returned, arguments as Redis receives them, calls at file load
-- refused, timeouts on the virtual clock, and many lanes calling at once.
local testing = require "luastream.testing"
local ls = require "luastream"

local SPEC_DIR = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")
local HERE = SPEC_DIR .. "/fixtures"

local apps = dofile(SPEC_DIR .. "/support/apps.lua")(HERE)
local start = apps.start

local last = apps.last

describe("ls.redis.call", function()
  after_each(apps.stop_all)

  it("runs commands on the host's server and returns their replies", function()
    local app = start("redis_call")
    app:publish("payments", { op = "post", id = 1, account = "acme", amount = 250 })
    app:publish("payments", { op = "post", id = 2, account = "acme", amount = 100 })
    local rec = last(app, "posted")
    assert.equal("number:2", rec.n)
    assert.equal("number:0", rec.fields) -- both fields existed already
    assert.equal("number:350", rec.balance)
    assert.equal("string:2", rec.posted)
    assert.equal("350", app:command("HGET", "balances", "acme"))
    assert.equal("2", app:command("HGET", "account:acme", "last"))
    assert.same({ "ack", "ack" }, { app:received("ledger")[1].outcome, app:received("ledger")[2].outcome })
    assert.same({}, app:pending("payments", "ledger"))
  end)

  it("converts replies as Redis scripting does and writes numbers exactly", function()
    local app = start("redis_call")
    app:publish("payments", { op = "types" })
    local rec = last(app, "types")
    assert.equal("{ok=string:OK}", rec.ok)
    assert.equal("boolean:false", rec.missing)
    assert.equal("{string:,string:2,string:2.5,string:a}", rec.list) -- sorted by show()
    assert.same({ "a", "2", "2.5", "" }, app:command("LRANGE", "list", "0", "-1"))
    assert.equal("{}", rec.empty)
    assert.equal("1099511627776", rec.big)
    assert.equal("1099511627776", app:command("GET", "big"))
  end)

  it("pcall returns nil and the error; call raises and the entry stays pending", function()
    local app = start("redis_call", { handler_errors = "record" })
    local id = app:publish("payments", { op = "wrongtype" })
    local rec = last(app, "pcall")
    assert.equal("nil:nil", rec.v)
    assert.equal("WRONGTYPE Operation against a key holding the wrong kind of value", rec.err)
    local d = app:received("ledger")[1]
    assert.equal("error", d.outcome)
    assert.matches("ledger.lua:%d+: WRONGTYPE Operation against a key holding the wrong kind of value", d.error)
    assert.equal(id, app:pending("payments", "ledger")[1].id)
  end)

  it("refuses commands that would change or block the connection every handler shares", function()
    local app = start("redis_call")
    app:publish("payments", { op = "refused" })
    local rec = last(app, "refused")
    assert.matches("^false ls%.redis%.pcall: SUBSCRIBE is not available to handlers: " ..
                   "it would change the connection every handler shares$", rec.r1)
    assert.matches("ls.redis.pcall: select is not available to handlers: it would change", rec.r2, 1, true)
    assert.matches("ls.redis.pcall: BLPOP is not available to handlers: it blocks the connection", rec.r3, 1, true)
    assert.matches("ls.redis.pcall: XREADGROUP is not available to handlers: BLOCK blocks the connection", rec.r4, 1, true)
    assert.matches("^true ", rec.r5) -- sent: a key named "block" after STREAMS is no BLOCK
    assert.equal("ack", app:received("ledger")[1].outcome)
  end)

  it("refuses an argument that is neither a string nor a number", function()
    local app = start("redis_call", { handler_errors = "record" })
    app:publish("payments", { op = "bad_argument" })
    local d = app:received("ledger")[1]
    assert.equal("error", d.outcome)
    assert.matches("ls.redis.call: argument 3 must be a string or a number, got table", d.error, 1, true)
    assert.equal(1, #app:pending("payments", "ledger"))
  end)

  it("gives up on a call past its timeout, on the host's clock", function()
    local app = start("redis_call")
    app:slow("PING", "3s")
    app:publish("payments", { op = "timeout" })
    assert.equal(0, #app:records("timed out"))
    app:advance("999ms")
    assert.equal(0, #app:records("timed out"))
    app:advance("1ms")
    local rec = last(app, "timed out")
    assert.equal("nil:nil", rec.v)
    assert.equal("redis PING: no reply within 1000ms (the command may still run on the server)",
                 rec.err)
    assert.equal("ack", app:received("ledger")[1].outcome)
    -- The late reply (at 3 s: the connection's next commands wait behind
    -- it, as on a server) finds nobody waiting and is dropped; calls go on.
    app:advance("2s")
    app:publish("payments", { op = "post", id = 1, account = "acme", amount = 7 })
    assert.equal("number:7", last(app, "posted").balance)
    assert.equal(1, #app:records("timed out"))
  end)

  it("drops the reply of a call whose handler was abandoned at the shutdown deadline", function()
    local app = start("redis_call")
    app:slow("PING", "1h")
    local id = app:publish("payments", { op = "forever" })
    assert.equal(0, #app:received("ledger"))
    assert.equal(id, app:pending("payments", "ledger")[1].id)
    app:stop() -- abandons the job, then closes the connection under its call
    assert.equal(1, #app:records("shutdown deadline reached"))
    assert.equal("1", app:records("shutdown deadline reached")[1].unfinished)
    assert.equal(0, #app:records("never"))
    assert.equal(0, #app:received("ledger"))
  end)

  it("fails a handler file that calls Redis at load, saying why", function()
    local ok, err = pcall(testing.app, HERE .. "/redis_call_at_load")
    assert.is_false(ok)
    assert.matches("early.lua:4: ls.redis.call may only be called while handling an entry", tostring(err),
                   1, true)
  end)

  it("pipelines the calls of many lanes on one connection", function()
    local app = start("redis_call_lanes")
    -- One command adds all 64 (each app:command settles: one by one, every
    -- entry would run alone).
    assert(app:command("EVAL", [[
      for i = 1, 64 do redis.call("XADD", "payments", "*", "data", '{"id":' .. i .. '}') end
      return 64
    ]], "0"))
    app:settle()
    assert.equal(64, #app:received("count"))
    for _, d in ipairs(app:received("count")) do assert.equal("ack", d.outcome) end
    -- Every INCR was sent before any GET: all 64 lanes were waiting at once.
    local seen = app:command("HGETALL", "seen")
    assert.equal(128, #seen)
    for i = 2, #seen, 2 do assert.equal("64", seen[i]) end
  end)

  it("raises outside a host", function()
    assert.has_error(function() ls.redis.call("GET", "k") end,
                     "only available inside a running luastream host")
  end)
end)
