-- ls.pg on the harness (docs/testing.md, "PostgreSQL"): the host on the
-- virtual clock, its queries on a real PostgreSQL the spec names with
-- {postgres = URL}: a private PostgreSQL the spec starts
-- (tests/integration/support/postgres.lua), or the one LUASTREAM_TEST_POSTGRES
-- names (a libpq connection string or URL of a database the spec may create
-- tables in).
-- Without {postgres = URL}, ls.pg fails the delivery saying so.
local SPEC_DIR = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")
local apps = dofile(SPEC_DIR .. "/support/apps.lua")(SPEC_DIR .. "/fixtures")
local start = apps.start

local PG = os.getenv("LUASTREAM_TEST_POSTGRES")

describe("ls.pg on the harness", function()
  after_each(apps.stop_all)

  it("fails the delivery without {postgres = URL}, saying how to give one", function()
    local app = start("pg", { handler_errors = "record" })
    app:publish("payments", { id = 1, amount = 5 })
    local d = app:received("ledger")[1]
    assert.equal("error", d.outcome)
    assert.matches("no PostgreSQL in this spec: pass {postgres = URL} to testing.app", d.error, 1, true)
  end)

  local server -- started here when LUASTREAM_TEST_POSTGRES names none
  setup(function()
    if PG and PG ~= "" then return end
    server = require("tests.integration.support.postgres").start()
    PG = server.url
  end)
  teardown(function() if server then server:stop() end end)

  it("posts each payment once: the delivery after the retry skips", function()
    -- psql without the sanitizer busted may run under (it would hang there)
    os.execute("env -u LD_PRELOAD psql -X -q " .. "'" .. PG:gsub("'", "'\\''") .. "'"
      .. " -c 'SET client_min_messages = warning; DROP TABLE IF EXISTS pg_harness_ledger, pg_harness_processed;"
      .. " CREATE TABLE pg_harness_ledger (payment int PRIMARY KEY, amount int)' >/dev/null")
    local app = start("pg", { postgres = PG, pg_once_table = "pg_harness_processed" })
    app:publish("payments", { id = 1, amount = 250 })
    app:publish("payments", { id = 2, amount = 100 })
    local recs = app:records("posted")
    assert.equal(2, #recs)
    assert.equal("true", recs[1].ran)
    assert.equal("1", recs[1].got)
    assert.equal("350", recs[2].total)
    app:advance(1000) -- the retries come back, and skip
    recs = app:records("posted")
    assert.equal(4, #recs)
    assert.equal("false", recs[3].ran)
    assert.equal("false", recs[4].ran)
    assert.equal("350", recs[4].total)
    assert.same({ "ack", "ack" }, { app:received("ledger")[3].outcome, app:received("ledger")[4].outcome })
  end)

  it("returns nil, err, sqlstate: the server's code, or PostgreSQL's for the client's side", function()
    os.execute("env -u LD_PRELOAD psql -X -q " .. "'" .. PG:gsub("'", "'\\''") .. "'"
      .. " -c 'SET client_min_messages = warning; DROP TABLE IF EXISTS pg_harness_unique;"
      .. " CREATE TABLE pg_harness_unique (k text PRIMARY KEY)' >/dev/null")
    local app = start("pg_errors", { postgres = PG, pg_timeout = 1000 })
    local want = {
      duplicate = { "23505", '^23505: duplicate key value violates unique constraint "pg_harness_unique_pkey"' },
      syntax = { "42601", '^42601: syntax error at or near "SELEC" %(SELEC 1%)$' },
      timeout = { "57014", "^57014: canceling statement due to statement timeout %(SELECT pg_sleep%(3%)%)$" },
      deadline = { "57014", "^57014: no result within 1000ms %(the connection was closed%)" },
      lost = { "08006", "^08006: terminating connection due to administrator command" },
      commit = { "23505", "^23505: duplicate key value .*%(INSERT INTO pg_harness_unique" },
    }
    local order = { "duplicate", "syntax", "timeout", "deadline", "lost", "commit" }
    for i, op in ipairs(order) do
      app:publish("ops", { op = op })
      local recs = app:records("failed")
      assert.equal(i, #recs, op)
      local r = recs[i]
      assert.equal(op, r.op)
      assert.equal("nil", r.rows, op)
      assert.equal(want[op][1], r.state, op .. ": " .. r.err)
      assert.truthy(r.err:match(want[op][2]), op .. ": " .. r.err)
    end
  end)
end)
