-- The group's retry stream is trimmed of what the group has acknowledged
-- (docs/retries-delays-dead-letters.md#the-retry-stream), on the in-memory
-- broker with the virtual clock: copies of always-retrying entries do not
-- pile up, and an entry still pending or not yet delivered there is never
-- trimmed. The shared stream is never trimmed.

local SPEC_DIR = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")
local HERE = SPEC_DIR .. "/fixtures"
local RETRY = "payments:retry:ledger"

local apps = dofile(SPEC_DIR .. "/support/apps.lua")(HERE)
local start = apps.start

local function ids(app, key)
  local out = {}
  for i, e in ipairs(app:entries(key)) do out[i] = e.id end
  return out
end

describe("the retry stream", function()
  after_each(apps.stop_all)

  it("keeps what another group on the retry stream has not read", function()
    local app = start("retry_once")
    assert(app:command("XGROUP", "CREATE", RETRY, "audit", "0", "MKSTREAM"))
    for i = 1, 3 do app:publish("payments", { id = i }) end
    app:advance("5s") -- the copies handled and acked by ledger; sweeps ran
    assert.equal(6, #app:received("retry_payment"))
    assert.equal(3, app:xlen(RETRY), "audit has read none of the copies")
    local got = app:command("XREADGROUP", "GROUP", "audit", "a", "COUNT", "10", "STREAMS", RETRY, ">")
    assert.equal(3, #got[1][2])
    assert(app:command("XACK", RETRY, "audit", got[1][2][1][1], got[1][2][2][1], got[1][2][3][1]))
    -- audit's acks are not the host's: they are trimmed at its next sweep,
    -- a minute after the last (nothing delayed, nothing of its own acked)
    app:advance("50s")
    assert.equal(3, app:xlen(RETRY), "not before the next sweep")
    app:advance("10s")
    assert.equal(0, app:xlen(RETRY), "read and acknowledged by both groups: trimmed")
  end)

  it("ends empty once always-retrying entries are dead-lettered at the cap", function()
    local app = start("retry_always_new") -- max_deliveries = 3, dead_letter = payments.dead
    local N = 50
    for i = 1, N do app:publish("payments", { id = i }) end
    for _ = 1, 10 do app:advance("1s") end
    assert.equal(N * 3, #app:received("retry_payment"), "three deliveries each")
    assert.equal(N, app:xlen("payments.dead"), "each dead-lettered once")
    assert.same({}, app:pending(RETRY, "ledger"))
    assert.equal(0, app:xlen(RETRY), "acknowledged copies trimmed")
    assert.equal(N, app:xlen("payments"), "the shared stream is never trimmed")
    -- and it stays so as the sweep goes on
    app:advance("10s")
    assert.equal(0, app:xlen(RETRY))
    assert.equal(N, app:xlen("payments"))
  end)

  it("keeps every entry still pending or not yet delivered there", function()
    -- a broker whose only host reads another stream, to set the scene
    local probe = start("slow_claiming")
    local function cmd(...) return assert(probe:command(...)) end
    cmd("XGROUP", "CREATE", RETRY, "ledger", "0", "MKSTREAM")
    local a1 = cmd("XADD", RETRY, "*", "data", '{"id":1}')
    local a2 = cmd("XADD", RETRY, "*", "data", '{"id":2}')
    local a3 = cmd("XADD", RETRY, "*", "data", '{"id":3}')
    -- a host that crashed long ago read all three and acked the first and third
    cmd("XREADGROUP", "GROUP", "ledger", "old-host", "COUNT", "3", "STREAMS", RETRY, ">")
    cmd("XACK", RETRY, "ledger", a1, a3)
    local later = {}
    for i = 4, 7 do later[#later + 1] = cmd("XADD", RETRY, "*", "data", '{"id":' .. i .. '}') end

    -- one lane, a handler that never comes back: 4 is run, the rest wait
    local app = start("hang_new", { with = probe })
    app:advance("5s")
    local pending = app:pending(RETRY, "ledger")
    assert.equal(a2, pending[1].id)
    assert.equal("old-host", pending[1].consumer)
    assert.equal(later[1], pending[2].id, "the host's own")
    assert.is_true(#pending < 6, "some of 4..7 not yet delivered")
    -- a1 went (acked, before everything still needed); a3 stays behind the
    -- pending a2: the trim keeps everything from the oldest entry still needed
    assert.same({ a2, a3, later[1], later[2], later[3], later[4] }, ids(app, RETRY))

    cmd("XACK", RETRY, "ledger", a2)
    app:advance("60s") -- the next sweep: a minute after the last
    assert.same(later, ids(app, RETRY), "acked a2 and a3 trimmed; 4 pending, 5..7 kept")
    assert.equal(0, app:xlen("payments"), "nothing written to the shared stream")
  end)
end)
