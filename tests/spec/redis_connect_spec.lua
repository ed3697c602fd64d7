-- ls.redis.connect (docs/handlers.md, "Calling Redis") on the harness: a
-- second in-memory server per URL on the same clock, read by the spec with
-- app:command_on; call, pcall and with_timeout on it; one connection per URL;
-- a lost connection; calls at load refused; a bad URL refused at connect.
local testing = require "luastream.testing"

local SPEC_DIR = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")
local HERE = SPEC_DIR .. "/fixtures"
local OTHER = "redis://:s3cret@ledger.example:6390/2"

local apps = dofile(SPEC_DIR .. "/support/apps.lua")(HERE)
local start = apps.start

local last = apps.last

describe("ls.redis.connect", function()
  after_each(apps.stop_all)

  it("runs commands on the second server, not the host's", function()
    local app = start("redis_connect")
    assert(app:command_on(OTHER, "HSET", "balances", "acme", "1000")) -- filled before any call
    app:publish("payments", { op = "post", account = "acme", amount = 250 })
    app:publish("payments", { op = "post", account = "acme", amount = 100 })
    local rec = last(app, "posted")
    assert.equal("1350", rec.balance)
    assert.equal("0", rec.here)
    assert.equal("1350", app:command_on(OTHER, "HGET", "balances", "acme"))
    assert.same({}, { app:command("HGET", "balances", "acme") })
    assert.same({}, app:pending("payments", "mirror"))
  end)

  it("tells servers apart by URL: another db, host or port is another server", function()
    local app = start("redis_connect")
    app:publish("payments", { op = "post", account = "acme", amount = 5 })
    assert.equal("5", app:command_on(OTHER, "HGET", "balances", "acme"))
    assert.same({}, { app:command_on("redis://ledger.example:6390/3", "HGET", "balances", "acme") })
    assert.same({}, { app:command_on("redis://ledger.example:6391/2", "HGET", "balances", "acme") })
  end)

  it("pcall returns nil and the error; call raises and the entry stays pending", function()
    local app = start("redis_connect", { handler_errors = "record" })
    local id = app:publish("payments", { op = "wrongtype" })
    local rec = last(app, "pcall")
    assert.equal("nil", rec.v)
    assert.equal("WRONGTYPE Operation against a key holding the wrong kind of value", rec.err)
    local d = app:received("mirror")[1]
    assert.equal("error", d.outcome)
    assert.matches("mirror.lua:%d+: WRONGTYPE Operation against a key", d.error)
    assert.equal(id, app:pending("payments", "mirror")[1].id)
    assert.equal("x", app:command_on(OTHER, "GET", "plain"))
  end)

  it("gives up on a call past its with_timeout, on the host's clock", function()
    local app = start("redis_connect")
    app:slow("PING", "3s", OTHER)
    app:publish("payments", { op = "timeout" })
    app:advance("999ms")
    assert.equal(0, #app:records("timed out"))
    app:advance("1ms")
    local rec = last(app, "timed out")
    assert.equal("nil", rec.v)
    assert.equal("redis PING (redis://:***@ledger.example:6390/2): no reply within 1000ms " ..
                 "(the command may still run on the server)", rec.err)
    assert.equal("ack", app:received("mirror")[1].outcome)
  end)

  it("refuses the commands ls.redis refuses, naming the client", function()
    local app = start("redis_connect")
    app:publish("payments", { op = "refused" })
    local rec = last(app, "refused")
    assert.equal("false", rec.ok)
    assert.matches('ls.redis.connect("redis://:***@ledger.example:6390/2").pcall: SELECT is not ' ..
                   "available to handlers", rec.err, 1, true)
  end)

  it("shares one connection per URL among clients made at load and while handling", function()
    local app = start("redis_connect")
    app:publish("payments", { op = "again" })
    app:publish("payments", { op = "again" })
    assert.equal("2", last(app, "again").n)
    assert.equal(1, #app:records("connecting for handlers"))
    assert.equal("redis://:***@ledger.example:6390/2", app:records("connecting for handlers")[1].redis)
    for _, line in ipairs(app:logs()) do assert.is_nil(line:find("s3cret", 1, true)) end
  end)

  it("fails the calls when the server is down, and works again once it is back", function()
    local app = start("redis_connect", { handler_errors = "record" })
    app:server_down(OTHER, true)
    local id = app:publish("payments", { op = "lost" })
    local rec = last(app, "lost")
    assert.equal("nil", rec.v)
    assert.matches("^redis GET %(redis://:%*%*%*@ledger.example:6390/2%): not connected", rec.err)
    assert.equal("error", app:received("mirror")[1].outcome)
    assert.equal(id, app:pending("payments", "mirror")[1].id)
    app:server_down(OTHER, false)
    app:publish("payments", { op = "post", account = "acme", amount = 3 })
    assert.equal("3", last(app, "posted").balance)
  end)

  it("fails a call in flight when the connection drops, without sending it again", function()
    local app = start("redis_connect", { handler_errors = "record" })
    app:slow("PING", "3s", OTHER)
    app:publish("payments", { op = "timeout" }) -- PING in flight on the server, 3 s slow
    app:server_down(OTHER, true)
    local rec = last(app, "timed out")
    assert.equal("nil", rec.v)
    assert.matches("^redis PING %(redis://:%*%*%*@ledger.example:6390/2%): connection lost", rec.err)
    app:server_down(OTHER, false)
    app:advance("10s")
    assert.equal(1, #app:records("timed out"))
  end)

  it("raises a bad URL at connect, naming the problem and not the password", function()
    local app = start("redis_connect", { handler_errors = "record" })
    app:publish("payments", { op = "bad_url" })
    local d = app:received("mirror")[1]
    assert.equal("error", d.outcome)
    assert.matches('mirror.lua:%d+: ls.redis.connect: redis URL "redis://:%*%*%*@host:99999": ' ..
                   "port must be 1%-65535", d.error)
    assert.is_nil(d.error:find("hunter2", 1, true))
  end)

  it("fails a handler file with a bad URL at load", function()
    local ok, err = pcall(testing.app, HERE .. "/redis_connect_bad_url")
    assert.is_false(ok)
    assert.matches('bad.lua:4: ls.redis.connect: redis URL "redis://user:***@cache.example:notaport/1": ',
                   tostring(err), 1, true)
    assert.is_nil(tostring(err):find("hunter2", 1, true))
  end)

  it("connects for real when the app runs on a real server", function()
    local helper = require "tests.integration.helper"
    finally(helper.cleanup)
    local srv, other = helper.redis_start(), helper.redis_start()
    local dir = helper.handlers_dir({ ["mirror.lua"] = string.format([[
      local ls = require "luastream"
      local other = ls.redis.connect(%q)
      return { stream = "payments", group = "mirror",
               handle = function(p) other.call("INCRBY", "total", p.amount) end }
    ]], other.url) })
    local app = testing.app(dir, { redis = srv.url })
    apps.keep(app)
    assert.equal("OK", app:command_on(other.url, "SET", "total", "7"))
    app:publish("payments", { amount = 5 })
    app:settle()
    assert.equal("ack", app:received("mirror")[1].outcome)
    assert.equal("12", other:cli("GET", "total"))
    assert.equal("12", app:command_on(other.url, "GET", "total"))
    assert.equal("0", srv:cli("EXISTS", "total"))
    app:stop()
  end)

  it("fails a handler file that calls the second server at load, saying why", function()
    local ok, err = pcall(testing.app, HERE .. "/redis_connect_at_load")
    assert.is_false(ok)
    assert.matches('early.lua:5: ls.redis.connect("redis://127.0.0.1:6390").call may only be ' ..
                   "called while handling an entry", tostring(err), 1, true)
  end)
end)
