-- The payments example (handlers/) on the in-memory broker with a paused
-- clock: what the guide promises, checked without a Redis server or a wait.
local testing = require "luastream.testing"
local ls = require "luastream"

local HERE = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") .. "/fixtures"
local HANDLERS = HERE .. "/../../../handlers"

local function payment(id, account, cents)
  return { id = id, account = account, amount_cents = cents }
end

describe("the payments example", function()
  local app
  after_each(function() if app then app:stop() end end)

  it("leaves a payment of a migrating account pending and posts it again after min_idle", function()
    app = testing.app(HANDLERS)
    local id = app:publish("payments", payment(7, "migrating-acme", 500), { key = "migrating-acme" })

    local first = app:received("post_payment")
    assert.equal(1, #first)
    assert.equal("retry", first[1].outcome)
    assert.equal("0", first[1].headers[ls.DELIVERY_COUNT_HEADER])

    app:advance("29s") -- not idle long enough yet
    assert.equal(1, #app:received("post_payment"))

    app:advance("1s")
    local deliveries = app:received("post_payment")
    assert.equal(2, #deliveries)
    assert.equal(id, deliveries[2].id) -- the same entry, not a copy
    assert.equal("1", deliveries[2].headers[ls.DELIVERY_COUNT_HEADER])
    assert.equal(1, app:xlen("payments")) -- no copy on the stream
    local pending = app:pending("payments", "ledger")
    assert.equal(1, #pending)
    assert.equal(id, pending[1].id)
    assert.equal(2, pending[1].deliveries)
  end)

  it("posts an ordinary payment once to the ledger and replies", function()
    app = testing.app(HANDLERS)
    local id = app:publish("payments", payment(1, "acme", 500), { key = "acme" })
    app:publish("payments", payment(2, "acme", -120), { key = "acme" })
    local got = app:received("post_payment")
    assert.equal(2, #got)
    assert.equal("reply", got[1].outcome)
    assert.equal(0, #app:pending("payments", "ledger"))
    assert.equal("380", app:command("HGET", "ledger:balances", "acme"))
    assert.same({ "1", "2" }, app:command("LRANGE", "ledger:history:acme", 0, -1))
    local replies = app:entries("payments.posted")
    assert.equal(2, #replies)
    assert.same({ payment_id = 1, account = "acme" }, replies[1].message)
    assert.equal(id, replies[1].headers[ls.ORIGINAL_ID_HEADER])
    app:advance("1m")
    assert.equal(2, #app:received("post_payment"))
  end)

  it("rejects a payment it cannot post, and writes nothing to the ledger", function()
    app = testing.app(HANDLERS)
    app:publish("payments", payment(1, "acme", 12.5), { key = "acme" })
    assert.equal("reject", app:received("post_payment")[1].outcome)
    assert.equal(0, app:command("EXISTS", "ledger:balances", "ledger:history:acme"))
    assert.equal(0, app:xlen("payments.posted"))
    assert.equal(0, #app:pending("payments", "ledger"))
  end)

  it("screens payments already on the stream and replies with the original id", function()
    app = testing.app(HANDLERS)
    local small = app:publish("payments", payment(1, "acme", 500))
    local large = app:publish("payments", payment(2, "globex", 2500000))
    local replies = app:entries("payments.screened")
    assert.equal(2, #replies)
    assert.same({ payment_id = 1, suspicious = false }, replies[1].message)
    assert.equal(small, replies[1].headers[ls.ORIGINAL_ID_HEADER])
    assert.same({ payment_id = 2, suspicious = true }, replies[2].message)
    assert.equal(large, replies[2].headers[ls.ORIGINAL_ID_HEADER])
    assert.equal(0, #app:pending("payments", "fraud"))
  end)

  it("stops at the version gate on a server older than 8.4", function()
    local ok, err = pcall(testing.app, HANDLERS, { version = "7.2.4" })
    assert.is_false(ok)
    assert.matches('post_payment.lua: read = "claiming" (stream payments, group ledger) needs Redis 8.4 or later; memory runs 7.2.4',
      err, 1, true)
  end)

  it("runs the before-8.4 set on an older server", function()
    app = testing.app(HANDLERS .. "/before-8.4", { version = "7.2.4" })
    app:publish("payments", payment(1, "acme", 500), { key = "acme" })
    assert.equal("reply", app:received("post_new_payment")[1].outcome)
    assert.equal("500", app:command("HGET", "ledger:balances", "acme"))
    assert.equal(1, app:xlen("payments.posted"))
    assert.equal(1, app:xlen("payments.screened"))
  end)
end)

describe("lanes by key on the paused clock", function()
  it("posts each account's payments in stream order while accounts run side by side", function()
    local app = testing.app(HERE .. "/lanes")
    local published, order = {}, {}
    math.randomseed(7)
    for i = 1, 400 do
      local account = "acct-" .. (i % 20)
      published[#published + 1] = i
      app:command("XADD", "payments", "*", "data",
        string.format('{"id":%d,"account":"%s","amount_cents":1,"pause_ms":%d}', i, account, math.random(0, 3)),
        "partition-key", account)
    end
    local started = app:now()
    for _ = 1, 2000 do
      app:advance(1)
      if #app:received("post_slowly") == #published then break end
    end
    local got = app:received("post_slowly")
    assert.equal(#published, #got)
    for _, d in ipairs(got) do
      local list = order[d.message.account] or {}
      list[#list + 1] = d.message.id
      order[d.message.account] = list
    end
    for account, ids in pairs(order) do
      for i = 2, #ids do
        assert(ids[i - 1] < ids[i], account .. ": payment " .. ids[i] .. " posted after " .. ids[i - 1])
      end
    end
    local sum = 0
    for _, d in ipairs(got) do sum = sum + d.message.pause_ms end
    assert(app:now() - started < sum / 2, "lanes did not overlap: " .. (app:now() - started) ..
      " ms of clock for " .. sum .. " ms of pauses")
    app:stop()
  end)
end)
