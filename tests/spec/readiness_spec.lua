-- Readiness and a subscription's periodic work (docs/operations.md, /readyz):
-- work that keeps failing on the server (the delay-set sweep, the consumer
-- lease's renewal) makes the host not ready, naming the work, its keys and
-- the error, once it has failed for as long as a stuck read (3 x the 4 s
-- BLOCK of a `new` read); ready again once it works. On the in-memory broker
-- with the virtual clock.

local SPEC_DIR = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")
local HERE = SPEC_DIR .. "/fixtures"

local apps = dofile(SPEC_DIR .. "/support/apps.lua")(HERE)
local start = apps.start

local function count(app, msg)
  local n = 0
  for _, line in ipairs(app:logs()) do
    if line:find('msg="' .. msg .. '"', 1, true) then n = n + 1 end
  end
  return n
end

describe("readiness while periodic work fails", function()
  after_each(apps.stop_all)

  it("is not lost for good by one outcome that failed: acks written later make it ready", function()
    local app = start("sometimes_publish", { consumer = "c" })
    assert.is_true(app:ready())
    assert(app:command("SET", "audit", "x")) -- the publish's XADD fails: WRONGTYPE
    app:publish("payments", { id = 1, audit = true })
    app:advance("13s")
    local ok, why = app:ready()
    assert.is_false(ok)
    assert.matches("writing outcomes", why, 1, true)
    for i = 2, 4 do
      app:publish("payments", { id = i })
      app:advance("1s")
    end
    assert.is_true(app:ready())
  end)

  it("is lost while the delay-set sweep keeps failing, and back once it works", function()
    local app = start("delay_on_new", { consumer = "c" })
    assert.is_true(app:ready())
    -- the delay set is not a sorted set any more: every sweep fails
    assert(app:command("SET", "payments:delayed:ledger", "not a sorted set"))
    app:advance("60s") -- the first failing sweep: the set was empty, a minute later
    app:advance("11s")
    assert.is_true(app:ready(), "not yet as long as a stuck read")
    app:advance("2s")
    local ok, why = app:ready()
    assert.is_false(ok)
    assert.matches("^subscription defer_payment: stuck: the delay%-set sweep failing for %d+ ms: "
      .. "EVAL on payments:delayed:ledger payments:retry:ledger payments:delayed:ledger:unreadable: WRONGTYPE", why)
    -- logged once, not at every sweep
    assert.equal(1, count(app, "the delay-set sweep failed, retrying"))

    assert(app:command("DEL", "payments:delayed:ledger"))
    app:advance("1s")
    assert.is_true(app:ready())
    assert.equal(1, count(app, "the delay-set sweep works again"))
  end)

  it("is lost while the consumer lease cannot be renewed, and back once it can", function()
    local app = start("delay_on_new", { consumer = "c" })
    assert.is_true(app:ready())
    local key = "luastream:consumer:{payments}:ledger:c"
    assert.is_truthy(app:command("GET", key))
    -- the lease key holds another type: the renewal script fails (WRONGTYPE)
    app:command("DEL", key)
    assert(app:command("ZADD", key, "1", "x"))
    app:advance("12s") -- renewals every 5 s: failing for more than 6 s
    local ok, why = app:ready()
    assert.is_false(ok)
    assert.matches("^subscription defer_payment: stuck: the consumer lease failing for %d+ ms: "
      .. "EVAL on luastream:consumer:{payments}:ledger:c: ", why)
    assert.matches("WRONGTYPE", why, 1, true)
    assert.equal(1, count(app, "the consumer lease failed, retrying"))

    app:command("DEL", key)
    app:advance("5s") -- the next renewal takes the name again
    assert.is_true(app:ready())
    assert.equal(1, count(app, "the consumer lease works again"))
  end)
end)
