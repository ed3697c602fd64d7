-- ctx:pg_once_batch on the harness (docs/handlers.md, "Exactly once:
-- ctx:pg_once"): the host on the virtual clock, its queries on a real
-- PostgreSQL (a private one the spec starts, or LUASTREAM_TEST_POSTGRES's).
-- A call's entries are recorded in one transaction with its rows; the same
-- entries delivered again find themselves recorded: fresh is empty and the
-- function does not run.
local SPEC_DIR = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")
local apps = dofile(SPEC_DIR .. "/support/apps.lua")(SPEC_DIR .. "/fixtures")

local PG = os.getenv("LUASTREAM_TEST_POSTGRES")

local function psql(sql)
  -- psql without the sanitizer busted may run under (it would hang there)
  local f = assert(io.popen("env -u LD_PRELOAD psql -X -q -At '" .. PG:gsub("'", "'\\''") .. "' -c '"
    .. sql:gsub("'", "'\\''") .. "'"))
  local out = f:read("*a")
  f:close()
  return (out:gsub("%s+$", ""))
end

describe("ctx:pg_once_batch on the harness", function()
  after_each(apps.stop_all)

  local server
  setup(function()
    if PG and PG ~= "" then return end
    server = require("tests.integration.support.postgres").start()
    PG = server.url
  end)
  teardown(function() if server then server:stop() end end)

  it("records a call's entries with its rows in one transaction; delivered again, it skips them", function()
    psql("SET client_min_messages = warning; DROP TABLE IF EXISTS pg_harness_batch, pg_harness_batch_keys; "
      .. "CREATE TABLE pg_harness_batch (payment int PRIMARY KEY, amount int)")
    local app = apps.start("pg_batch", { postgres = PG, pg_once_table = "pg_harness_batch_keys" })
    local args = {}
    for i = 1, 5 do
      args[#args + 1] = string.format('{"id":%d,"amount":%d}', i, i * 10)
    end
    app:command("EVAL", "for i = 1, #ARGV do redis.call('XADD', KEYS[1], '*', 'data', ARGV[i]) end", 1, "payments",
      unpack(args))
    app:settle()
    app:advance(1000) -- the retry copies come back: recorded already
    local recs = app:records("posted")
    assert.same({ "true", "5", "5" }, { recs[1].ran, recs[1].fresh, recs[1].entries }, "one call of 5")
    local again = 0
    for k = 2, #recs do
      assert.equal("false", recs[k].ran)
      again = again + tonumber(recs[k].entries)
    end
    assert.equal(5, again)
    assert.equal("5 150", psql("SELECT count(*) || ' ' || sum(amount) FROM pg_harness_batch"))
    assert.equal("5", psql("SELECT count(*) FROM pg_harness_batch_keys WHERE grp = 'ledger-batch'"))
    assert.same({}, app:pending("payments", "ledger-batch"))
  end)
  it("in a call of entries recorded before and new ones, runs fn on the new ones only", function()
    psql("SET client_min_messages = warning; DROP TABLE IF EXISTS pg_harness_partial, pg_harness_partial_keys; "
      .. "CREATE TABLE pg_harness_partial (payment int PRIMARY KEY, amount int)")
    local app = apps.start("pg_batch_partial", { postgres = PG, pg_once_table = "pg_harness_partial_keys" })
    app:command("EVAL", "for i = 1, #ARGV do redis.call('XADD', KEYS[1], '*', 'data', ARGV[i]) end", 1, "payments",
      '{"id":1,"amount":10,"again":true}', '{"id":2,"amount":20}', '{"id":3,"amount":30,"again":true}')
    app:advance(2000) -- the first call: 1, 2, 3; the copies of 1 and 3 start the next
    app:advance(500)
    app:command("EVAL", "for i = 1, #ARGV do redis.call('XADD', KEYS[1], '*', 'data', ARGV[i]) end", 1, "payments",
      '{"id":4,"amount":40}', '{"id":5,"amount":50}')
    app:advance(2000)
    local recs = app:records("posted")
    assert.equal(2, #recs)
    assert.same({ "true", "1,2,3", "3" }, { recs[1].ran, recs[1].fresh, recs[1].entries })
    assert.same({ "true", "4,5", "4" }, { recs[2].ran, recs[2].fresh, recs[2].entries }, "1 and 3 recorded before")
    assert.equal("5 150", psql("SELECT count(*) || ' ' || sum(amount) FROM pg_harness_partial"))
    assert.equal("5", psql("SELECT count(*) FROM pg_harness_partial_keys WHERE grp = 'ledger-partial'"))
    assert.same({}, app:pending("payments", "ledger-partial"))
  end)
end)
