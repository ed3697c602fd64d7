-- The default delivery cap and how retries are logged
-- (docs/retries-delays-dead-letters.md#counting-deliveries-max_deliveries), on
-- the in-memory broker with the virtual clock.

local SPEC_DIR = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")
local HERE = SPEC_DIR .. "/fixtures"
local DEFAULT_CAP = 10 -- max_deliveries when a handler file sets none (documented)

local apps = dofile(SPEC_DIR .. "/support/apps.lua")(HERE)
local start = apps.start

-- Entries of a stream, 0 when it does not exist.
local function xlen(app, key) return assert(app:command("XLEN", key)) end

-- Entries on the stream and the group's retry stream, where a `new` retry
-- writes its copies (acknowledged copies are trimmed from it).
local function stream_entries(app)
  return xlen(app, "payments") + xlen(app, "payments:retry:ledger")
end

-- Copies ever written to the retry stream (XINFO STREAM entries-added).
local function copies(app)
  local info = assert(app:command("XINFO", "STREAM", "payments:retry:ledger"))
  for i = 1, #info, 2 do
    if info[i] == "entries-added" then return info[i + 1] end
  end
end

describe("the delivery cap", function()
  after_each(apps.stop_all)

  it("stops a `new` handler that always retries after the default number of deliveries", function()
    local app = start("retry_uncapped_new")
    local body = { id = 1, account = "acme", note = string.rep("x", 10000) }
    local id = app:publish("payments", body, { key = "acme" })
    app:advance("1m")
    local got = app:received("retry_payment")
    assert.equal(DEFAULT_CAP, #got)
    assert.equal(id, got[1].id)
    -- Memory stays bounded: one copy per retry, no more; of them only the
    -- last, still pending, stays on the retry stream.
    assert.equal(DEFAULT_CAP - 1, copies(app))
    assert.equal(2, stream_entries(app), "the original and the pending copy")
    -- Without a dead_letter stream the last copy stays pending, logged once.
    local limit = app:records("delivery limit reached, entry left pending (no dead_letter stream)")
    assert.equal(1, #limit)
    assert.equal(tostring(DEFAULT_CAP), limit[1].deliveries)
    -- the id is a copy's: the line names the key it is pending on
    assert.equal("payments:retry:ledger", limit[1].retry_stream)
    assert.equal(1, #app:pending("payments:retry:ledger", "ledger"))
    assert.equal(limit[1].id, app:pending("payments:retry:ledger", "ledger")[1].id)
    app:advance("10m")
    assert.equal(DEFAULT_CAP, #app:received("retry_payment"))
    assert.equal(DEFAULT_CAP - 1, copies(app))
    assert.equal(2, stream_entries(app))
  end)

  it("is turned off by max_deliveries = false", function()
    local app = start("retry_uncapped_claiming")
    app:publish("payments", { id = 1, account = "acme" })
    for _ = 1, 2 * DEFAULT_CAP do app:advance("1s") end
    assert.is_true(#app:received("retry_payment") > DEFAULT_CAP)
    assert.equal(0, #app:records("delivery limit reached, entry left pending (no dead_letter stream)"))
    assert.equal(1, #app:pending("payments", "ledger"))
  end)
end)

describe("retries", function()
  after_each(apps.stop_all)

  it("are logged once with the id, then as one count per 10 s, not a line per delivery", function()
    local app = start("retry_uncapped_claiming")
    local id = app:publish("payments", { id = 1, account = "acme" })
    local first = app:records("entry retried")
    assert.equal(1, #first)
    assert.equal(id, first[1].id)
    assert.equal("1", first[1].deliveries)
    assert.equal("ledger", first[1].group)

    for _ = 1, 9 do app:advance("1s") end -- 9 more deliveries within the interval
    assert.equal(10, #app:received("retry_payment"))
    assert.equal(1, #app:records("entry retried"))
    assert.equal(0, #app:records("entries retried"))

    app:advance("1s") -- the interval ends (and an 11th delivery starts the next)
    local counts = app:records("entries retried")
    assert.equal(1, #counts)
    assert.equal("9", counts[1].count)
    assert.equal("10", counts[1].total)
    app:advance("10s")
    counts = app:records("entries retried")
    assert.equal(2, #counts)
    assert.equal("10", counts[2].count)
    assert.equal("20", counts[2].total)
  end)

  it("are counted up to a stop: the count of an unfinished interval is logged then", function()
    local app = start("retry_uncapped_claiming")
    app:publish("payments", { id = 1, account = "acme" })
    app:advance("1s")
    app:advance("1s")
    app:stop()
    local counts = app:records("entries retried")
    assert.equal(1, #counts)
    assert.equal("2", counts[1].count)
  end)
end)
