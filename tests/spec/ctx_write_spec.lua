-- ctx:write (docs/handlers.md, "Effects with the ack: ctx:write") on the
-- in-memory broker and the virtual clock: the queued commands are applied
-- with the ack and only then; an entry taken over from a stalled host and
-- finished by both is written once, replied to once, published once.
local testing = require "luastream.testing"

local HERE = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") .. "/fixtures"

local apps = {}

local function start(opts)
  local app = testing.app(HERE .. "/ctx_write", opts)
  apps[#apps + 1] = app
  return app
end

describe("ctx:write", function()
  after_each(function()
    for _, app in ipairs(apps) do pcall(app.stop, app) end
    apps = {}
  end)

  it("applies the queued commands with the ack", function()
    local app = start()
    app:publish("payments", { id = "p1", account = "acme", amount = 250 })
    app:publish("payments", { id = "p2", account = "acme", amount = -100 })
    app:publish("payments", { id = "p3", account = "zeta", amount = 7 })
    assert.equal("150", app:command("HGET", "balances", "acme"))
    assert.equal("7", app:command("HGET", "balances", "zeta"))
    assert.same({ "p1", "p2" }, app:command("LRANGE", "history:acme", 0, -1))
    assert.equal(3, app:xlen("payments.posted"))
    assert.equal(3, app:xlen("ledger.posted"))
    assert.equal(0, #app:pending("payments", "ledger"))
  end)

  for _, outcome in ipairs({ "retry", "retry_after", "reject", "error", "bad" }) do
    it("applies nothing when the handler ends in " .. outcome, function()
      local app = start({ handler_errors = "record" })
      app:publish("payments", { id = "p1", account = "acme", amount = 250, outcome = outcome })
      app:advance("2s")
      assert.is_nil(app:command("HGET", "balances", "acme"))
      assert.equal(0, app:command("LLEN", "history:acme"))
      assert.equal(0, app:command("EXISTS", "payments.posted"))
      assert.equal(0, app:command("EXISTS", "ledger.posted"))
    end)
  end

  it("writes once when a stalled host and the one that took its entry over both finish it", function()
    local a = start({ hostname = "a" })
    local b = start({ hostname = "b", with = a })
    a:publish("payments", { id = "p1", account = "acme", amount = 250, stall = 1000 })
    assert.equal("a-ledger", a:pending("payments", "ledger")[1].consumer)
    a:stall("25s") -- a stops (SIGSTOP) while its handler waits: b claims its entry once idle
    b:advance("1s") -- past min_idle and finishes it; a resumes and finishes it too
    local posted = {} -- the hosts of one broker share their log records
    for _, r in ipairs(a:records("posted")) do posted[#posted + 1] = r.consumer end
    table.sort(posted)
    assert.same({ "a-ledger", "b-ledger" }, posted, "both hosts finished it")
    local skipped = a:records("already acknowledged by another consumer; effects skipped")
    assert.equal(1, #skipped, "the second to finish is told")
    assert.equal("reply", skipped[1].outcome)
    assert.equal("250", a:command("HGET", "balances", "acme"), "written once")
    assert.same({ "p1" }, a:command("LRANGE", "history:acme", 0, -1))
    assert.equal(1, a:xlen("payments.posted"), "one reply")
    assert.equal(1, a:xlen("ledger.posted"), "one publish")
    assert.equal(0, #a:pending("payments", "ledger"))
  end)
end)

describe("ctx:write arguments", function()
  after_each(function()
    for _, app in ipairs(apps) do pcall(app.stop, app) end
    apps = {}
  end)

  local function run(body)
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir " .. dir) == 0)
    local f = assert(io.open(dir .. "/h.lua", "w"))
    f:write('local ls = require "luastream"\nreturn { stream = "s", group = "g",\n',
            "handle = function(msg, ctx)\n", body, "\nend }\n")
    f:close()
    local app = testing.app(dir, { handler_errors = "record" })
    apps[#apps + 1] = app
    app:publish("s", { n = 1 })
    os.remove(dir .. "/h.lua")
    os.remove(dir)
    return app:received("h")[1]
  end

  it("sends numbers exactly as Redis wants them", function()
    local d = run('ctx:write("SET", "k", 2^53) ctx:write("SET", "f", 0.1) ctx:write("SET", "z", -0)')
    assert.equal("ack", d.outcome)
    assert.equal("9007199254740992", apps[1]:command("GET", "k"))
    assert.equal("0.1", apps[1]:command("GET", "f"))
    assert.equal("0", apps[1]:command("GET", "z"))
  end)

  it("writes nothing of an entry, ack included, when Redis does not have one of its commands", function()
    local d = run('ctx:write("SET", "k", "v") ctx:write("NOSUCHCMD", "k")')
    assert.equal("ack", d.outcome)
    local app = apps[1]
    assert.is_nil(app:command("GET", "k"), "a write went out before the refused one")
    assert.equal(1, #app:pending("s", "g"), "the entry is still pending")
    local rec = app:records("outcome not written, entry left pending")[1]
    assert.equal("NOSUCHCMD", rec.command)
    assert.equal("k", rec.key)
    assert.truthy(rec.error:find("Invalid command", 1, true), rec.error)
  end)

  it("raises in the handler for what cannot be written with the ack", function()
    for body, want in pairs({
      ['ctx:write("EVAL", "return 1", 0)'] = "EVAL is not available to handlers: scripts and the server's administration do not run in the script that writes the ack",
      ['ctx:write("MULTI")'] = "MULTI is not available to handlers",
      ['ctx:write("BLPOP", "q", 0)'] = "BLPOP is not available to handlers",
      ['ctx:write("SET", "k", {})'] = "argument 3 must be a string or a number, got table",
      ['ctx:write("SET", "k", 0/0)'] = "argument 3 is not a finite number",
      ['ctx:write("CONFIG", "SET", "maxmemory", "1")'] =
        "CONFIG SET is not available to handlers: it is the server's administration",
      ['ctx:write("FLUSHALL")'] = "FLUSHALL is not available to handlers: it is the server's administration",
      ['ctx:write("script", "flush")'] = "script flush is not available to handlers",
      ['local t = {} for i = 1, 7000 do t[i] = i end ctx:write("SADD", "k", unpack(t))'] =
        "7002 arguments, more than a command written with the ack may have (7000)",
      ['local h = {} for i = 1, 3500 do h["h" .. i] = i end ctx:publish("out", {}, { headers = h })'] =
        "ctx:publish: 7002 fields and values, more than an entry written with the ack may have",
      ['ctx:write()'] = "ctx:write: no command given",
      ['ctx:write(7)'] = "ctx:write: the command must be a string",
    }) do
      local d = run(body)
      assert.equal("error", d.outcome, body)
      assert.truthy(d.error:find(want, 1, true), body .. ": " .. d.error)
    end
  end)
end)
