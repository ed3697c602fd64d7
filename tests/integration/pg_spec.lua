-- ls.pg and ctx:pg_once against a real PostgreSQL and a real redis-server:
-- typed round trips, hostile parameters, NULL, the error text, a query past
-- its deadline, transactions that commit and roll back, pg_once across two
-- deliveries of one entry, and no password in the logs.
--
-- Each test starts a private PostgreSQL (tests/integration/support/
-- postgres.lua), unless LUASTREAM_TEST_POSTGRES names one: a libpq
-- connection string or postgresql:// URL of a database the spec may create
-- tables in.
local helper = require "tests.integration.helper"

local READY = 'msg="host ready"'
local PG_GIVEN = os.getenv("LUASTREAM_TEST_POSTGRES")
if PG_GIVEN == "" then PG_GIVEN = nil end
local PG = PG_GIVEN
local pg_server -- the test's own server, when LUASTREAM_TEST_POSTGRES names none

local function sh_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- psql's unaligned, tuples-only output of sql on the test database, as the
-- user of PG.
local function psql(sql)
  if pg_server then return pg_server:psql(sql, { tcp = true }) end
  local code, out, err = helper.run("psql -X -q -At -v ON_ERROR_STOP=1 " .. sh_quote(PG) .. " -c " .. sh_quote(sql),
    { timeout = 30 })
  assert(code == 0, "psql failed: " .. err)
  return helper.trim(out)
end

-- The handler: each entry names an op; each op logs what it saw.
local HANDLER = [==[
local ls = require "luastream"
local null = ls.pg.null

local function kind(v)
  if v == null then return "null" end
  return type(v) .. ":" .. tostring(v)
end

local ops = {}

function ops.types(p)
  local rows, err = ls.pg.query([=[
    SELECT $1::int2 AS i2, $2::int4 AS i4, $3::int8 AS i8, 9007199254740993::int8 AS big,
           -9007199254740992::int8 AS edge, 12.50::numeric AS num, 42::numeric AS num_int,
           0.1::float8 AS f8, 2.5::float4 AS f4, true AS yes, $4::bool AS no,
           'héllo'::text AS txt, 'v'::varchar(3) AS vc, 'nm'::name AS nm,
           '{"a": [1, 2]}'::jsonb AS jb, '{"b":1}'::json AS js,
           'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid AS id,
           '\xdeadbeef00ff'::bytea AS bin,
           '2026-12-02 05:38:16.123+00'::timestamptz AS tz,
           '2026-12-02 05:38:16.5'::timestamp AS ts,
           '2026-12-02'::date AS d, '05:38:16'::time AS t,
           NULL::text AS nothing]=], 7, -2147483648, 1e15, false)
  if not rows then ls.log.error("types failed", { err = err }) return end
  local r = rows[1]
  local fields = { n = #rows, affected = rows.affected }
  for k, v in pairs(r) do fields[k] = kind(v) end
  fields.bin = "bytes:" .. (r.bin:gsub(".", function(c) return string.format("%02x", c:byte()) end))
  ls.log.info("types", fields)
end

function ops.hostile(p)
  local values = { "it's", [[back\slash]], [[\x41]], "'); DROP TABLE pg_spec_t; --", "$1",
                   "\"quoted\"", "ünïcødé ✓", string.rep("long'\\", 20000), "", "line\nbreak\ttab" }
  local same = 0
  for i, v in ipairs(values) do
    local ins, err = ls.pg.query("INSERT INTO pg_spec_t (k, v) VALUES ($1, $2)", p.id * 100 + i, v)
    if not ins then ls.log.error("insert failed", { err = err }) return end
    local rows = ls.pg.query("SELECT v, $2::text = v AS eq FROM pg_spec_t WHERE k = $1", p.id * 100 + i, v)
    if rows[1].v == v and rows[1].eq == true then same = same + 1 end
  end
  local ok, nul = pcall(ls.pg.query, "SELECT $1::text", "a\0b")
  ls.log.info("hostile", { same = same, of = #values, nul_ok = tostring(ok), nul = tostring(nul) })
end

function ops.null(p)
  local rows = ls.pg.query("SELECT $1::text IS NULL AS a, $2::int IS NULL AS b, $3::text AS c, NULL AS d",
                           nil, null, "x")
  local r = rows[1]
  local ok, bad = pcall(ls.pg.query, "SELECT $1", {})
  ls.log.info("null", { a = kind(r.a), b = kind(r.b), c = kind(r.c), d = kind(r.d),
                        is_null = tostring(r.d == null), bad = tostring(bad), null = tostring(null) })
end

function ops.errors(p)
  local _, dup, dup_state = ls.pg.query("INSERT INTO pg_spec_u (k) VALUES ($1)", "secret-value-1")
  local _, dup2, dup2_state = ls.pg.query("INSERT INTO pg_spec_u (k) VALUES ($1)", "secret-value-1")
  local _, syntax, syntax_state = ls.pg.query("SELEC 1")
  local _, missing, missing_state = ls.pg.query("SELECT * FROM pg_spec_nowhere WHERE x = $1", 5)
  ls.pg.query("DROP TABLE IF EXISTS pg_spec_nowhere") -- a NOTICE, which must not reach the log
  -- the same through a transaction: tx:query's, and the COMMIT's for a tx:exec
  local _, _, tx_state = ls.pg.transaction(function(tx)
    local rows, err, state = tx:query("INSERT INTO pg_spec_u (k) VALUES ($1)", "secret-value-1")
    if not rows then return nil, err, state end
  end)
  local _, _, exec_state = ls.pg.transaction(function(tx)
    tx:exec("INSERT INTO pg_spec_u (k) VALUES ($1)", "secret-value-1")
    return true
  end)
  local _, _, own_state = ls.pg.transaction(function() return nil, "changed my mind" end)
  ls.log.info("errors", { dup = tostring(dup), dup_state = tostring(dup_state), dup2 = dup2,
                          dup2_state = dup2_state, syntax = syntax, syntax_state = syntax_state,
                          missing = missing, missing_state = missing_state, tx_state = tx_state,
                          exec_state = exec_state, own_state = tostring(own_state) })
end

function ops.slow(p)
  -- a connection made first: connecting counts against the deadline, and on
  -- a busy machine could eat the margin the server's timeout has
  ls.pg.query("SELECT 1")
  -- the server's statement_timeout (a little below --pg-timeout) ends it first
  local _, server, server_state = ls.pg.query("SELECT pg_sleep(5)")
  -- without it, the client's deadline: the connection is closed
  local _, client, client_state = ls.pg.transaction(function(tx)
    tx:query("SET LOCAL statement_timeout = 0")
    local rows, err, state = tx:query("SELECT pg_sleep(5)")
    if not rows then return nil, err, state end
    return rows
  end)
  local after = ls.pg.query("SELECT 1 AS one")
  ls.log.info("slow", { server = server, server_state = server_state, client = client,
                        client_state = client_state, after = after and after[1].one })
end

function ops.inflight(p)
  ls.log.info("waiting", { id = p.id })
  local rows, err, state = ls.pg.query("SELECT pg_sleep(30) AS slept")
  ls.log.info("inflight", { id = p.id, rows = tostring(rows), err = err, state = state })
end

function ops.after(p)
  local rows, err, state = ls.pg.query("SELECT $1::int AS id", p.id)
  ls.log.info("after", { id = rows and rows[1].id, err = err, state = state })
end

function ops.altered(p)
  -- one connection (--pg-pool 1): the SELECT is prepared on it, then the
  -- table changes, and the statement's result type with it
  ls.pg.query("SELECT * FROM pg_spec_t")
  ls.pg.query("ALTER TABLE pg_spec_t ADD COLUMN extra int")
  local _, first = ls.pg.query("SELECT * FROM pg_spec_t")
  local rows, again = ls.pg.query("SELECT * FROM pg_spec_t")
  ls.log.info("altered", { first = first, again = tostring(again), n = rows and #rows })
end

function ops.tx(p)
  local v, w = ls.pg.transaction(function(tx)
    tx:query("INSERT INTO pg_spec_tx (k) VALUES ($1)", p.id * 10 + 1)
    return "committed", 2
  end)
  local nv, nerr = ls.pg.transaction(function(tx)
    tx:query("INSERT INTO pg_spec_tx (k) VALUES ($1)", p.id * 10 + 2)
    return nil, "changed my mind"
  end)
  local ok, raised = pcall(ls.pg.transaction, function(tx)
    tx:query("INSERT INTO pg_spec_tx (k) VALUES ($1)", p.id * 10 + 3)
    error("boom")
  end)
  local fv, ferr = ls.pg.transaction(function(tx)
    tx:query("INSERT INTO pg_spec_tx (k) VALUES ($1)", p.id * 10 + 4)
    tx:query("INSERT INTO pg_spec_tx (k) VALUES ($1)", p.id * 10 + 4) -- a duplicate: the rest is aborted
    return "ignored the error"
  end)
  local saw = ls.pg.query("SELECT count(*) AS n FROM pg_spec_tx WHERE k BETWEEN $1 AND $2", p.id * 10, p.id * 10 + 9)
  ls.log.info("tx", { v = v, w = w, nv = tostring(nv), nerr = nerr, ok = tostring(ok),
                      raised = tostring(raised), fv = tostring(fv), ferr = tostring(ferr), n = saw[1].n })
end

function ops.exec(p)
  local base = p.id * 10
  -- deferred writes go with the COMMIT
  local v = ls.pg.transaction(function(tx)
    assert(tx:exec("INSERT INTO pg_spec_tx (k) VALUES ($1)", base + 1))
    assert(tx:exec("INSERT INTO pg_spec_tx (k) VALUES ($1)", base + 2))
    return "committed"
  end)
  -- a query after deferred writes sees them (they go first, in its round trip)
  local seen = ls.pg.transaction(function(tx)
    tx:exec("INSERT INTO pg_spec_tx (k) VALUES ($1)", base + 3)
    return tx:query("SELECT count(*) AS n FROM pg_spec_tx WHERE k BETWEEN $1 AND $2", base, base + 9)[1].n
  end)
  -- a deferred write that fails: the COMMIT answers with its error, naming it
  local fv, ferr = ls.pg.transaction(function(tx)
    tx:exec("INSERT INTO pg_spec_tx (k) VALUES ($1)", base + 4)
    tx:exec("INSERT INTO pg_spec_tx (k) VALUES ($1)", base + 1) -- a duplicate
    return "lost"
  end)
  -- ... or the next query does
  local qv, qerr = ls.pg.transaction(function(tx)
    tx:exec("INSERT INTO pg_spec_tx (k) VALUES ($1)", base + 2) -- a duplicate
    local rows, err = tx:query("SELECT 1 AS one")
    if not rows then return nil, err end
    return "lost"
  end)
  -- rolled back before anything was sent: nothing goes
  local rv, rerr = ls.pg.transaction(function(tx)
    tx:exec("INSERT INTO pg_spec_tx (k) VALUES ($1)", base + 5)
    return nil, "changed my mind"
  end)
  local n = ls.pg.query("SELECT count(*) AS n FROM pg_spec_tx WHERE k BETWEEN $1 AND $2", base, base + 9)[1].n
  ls.log.info("exec", { v = v, seen = seen, fv = tostring(fv), ferr = ferr, qv = tostring(qv), qerr = qerr,
                        rv = tostring(rv), rerr = rerr, n = n })
end

-- one connection (--pg-pool 1) throughout
function ops.exec_edges(p)
  local pid = function() return ls.pg.query("SELECT pg_backend_pid() AS pid")[1].pid end
  local pid0 = pid()
  -- rolled back with deferred statements never sent: they never run, and
  -- the connection is kept
  local rv = ls.pg.transaction(function(tx)
    tx:exec("SELECT nextval('pg_spec_seq')")
    return nil, "changed my mind"
  end)
  local after_rollback = ls.pg.query("SELECT is_called FROM pg_spec_seq")[1].is_called
  local pid1 = pid()
  -- a failing deferred statement aborts the statements after it in the
  -- batch, the COMMIT's first preparation among them: a later transaction
  -- must not take it for prepared
  local fv = ls.pg.transaction(function(tx)
    tx:exec("INSERT INTO pg_spec_tx (k) VALUES ($1)", 91)
    tx:exec("INSERT INTO pg_spec_tx (k) VALUES ($1)", 91)
    return "lost"
  end)
  local nv, nerr = ls.pg.transaction(function(tx)
    tx:exec("INSERT INTO pg_spec_tx (k) VALUES ($1)", 92)
    return "committed"
  end)
  local pid2 = pid()
  local ks = ls.pg.query("SELECT string_agg(k::text, ',' ORDER BY k) AS ks FROM pg_spec_tx WHERE k > 90")[1].ks
  ls.log.info("exec_edges", { rv = tostring(rv), seq_called = tostring(after_rollback), kept = tostring(pid0 == pid1),
                              fv = tostring(fv), nv = tostring(nv), nerr = tostring(nerr),
                              kept_after_error = tostring(pid1 == pid2), ks = ks })
end

function ops.misuse(p)
  -- COPY would hand libpq's results out forever: refused, the connection closed
  local copy_rows, copy_err = ls.pg.query("COPY (SELECT 1) TO STDOUT")
  -- a BEGIN of its own leaves a transaction open: the pool must not lend
  -- that connection on (it is closed, which rolls the transaction back)
  local before = ls.pg.query("SELECT pg_backend_pid() AS pid")
  ls.pg.query("BEGIN")
  local after = ls.pg.query("SELECT pg_backend_pid() AS pid")
  -- a session setting would follow the connection to the next job: closed
  -- too; SET LOCAL ends with its transaction, and the connection stays
  ls.pg.transaction(function(tx) tx:query("SET LOCAL lock_timeout = 1000") end)
  local kept = ls.pg.query("SELECT pg_backend_pid() AS pid, current_setting('lock_timeout') AS lt")
  ls.pg.query("SET lock_timeout = 2000")
  local reset = ls.pg.query("SELECT pg_backend_pid() AS pid, current_setting('lock_timeout') AS lt")
  ls.log.info("misuse", { copy = tostring(copy_rows), copy_err = copy_err,
                          fresh = tostring(before[1].pid ~= after[1].pid),
                          kept = tostring(kept[1].pid == after[1].pid), kept_lt = kept[1].lt,
                          reset = tostring(reset[1].pid ~= kept[1].pid), reset_lt = reset[1].lt })
end

function ops.once(p, ctx)
  local ran, got = ctx:pg_once(function(tx)
    local rows, err = tx:query("INSERT INTO pg_spec_ledger (payment, amount) VALUES ($1, $2)", p.id, p.amount)
    if not rows then return nil, err end
    return "posted"
  end)
  ls.log.info("once", { id = p.id, ran = tostring(ran), got = tostring(got), deliveries = ctx.deliveries })
  if ran then return ls.retry() end -- delivered again: must be skipped
end

return {
  stream = "jobs", group = "pg", start = "beginning", workers = 8,
  handle = function(p, ctx) return ops[p.op](p, ctx) end,
}
]==]

describe("ls.pg without PostgreSQL configured", function()
  after_each(helper.cleanup)

  it("raises, naming the ways to configure one, and never connects", function()
    local srv = helper.redis_start()
    local host = helper.host_start({}, { server = srv, dir = helper.handlers_dir({ ["pg.lua"] = HANDLER }),
      env = { LUASTREAM_POSTGRES = false, PGHOST = false, PGSERVICE = false, PGDATABASE = false } })
    host:wait_log(READY, 20, { plain = true })
    assert(srv:call("XADD", "jobs", "*", "data", '{"op":"after","id":1}'))
    host:wait_log("ls.pg.query: no PostgreSQL configured (--postgres, LUASTREAM_POSTGRES or PG* variables)",
                  20, { plain = true })
    assert.equal(0, #host:lines("postgres configured", true))
    assert.equal(0, host:stop())
  end)
end)

describe("ls.pg on a real PostgreSQL", function()
  before_each(function()
    pg_server = not PG_GIVEN and helper.postgres_start() or nil
    PG = PG_GIVEN or pg_server.url
  end)
  after_each(helper.cleanup)

  local srv, host
  local function start(args, env)
    psql([[DROP TABLE IF EXISTS pg_spec_t, pg_spec_u, pg_spec_tx, pg_spec_ledger, pg_spec_processed;
           DROP SEQUENCE IF EXISTS pg_spec_seq;
           CREATE SEQUENCE pg_spec_seq;
           CREATE TABLE pg_spec_t (k int PRIMARY KEY, v text);
           CREATE TABLE pg_spec_u (k text PRIMARY KEY);
           CREATE TABLE pg_spec_tx (k int PRIMARY KEY);
           CREATE TABLE pg_spec_ledger (payment int PRIMARY KEY, amount int)]])
    srv = helper.redis_start()
    local a = { "--pg-once-table", "pg_spec_processed" }
    for _, x in ipairs(args or {}) do a[#a + 1] = x end
    host = helper.host_start(a, { server = srv, dir = helper.handlers_dir({ ["pg.lua"] = HANDLER }),
                                   env = env or { LUASTREAM_POSTGRES = PG } })
    host:wait_log(READY, 20, { plain = true })
  end
  local function publish(body) assert(srv:call("XADD", "jobs", "*", "data", body)) end

  it("returns every supported type as documented", function()
    start()
    publish('{"op":"types"}')
    local r = host:wait_records({ msg = "types" }, 1, 20, "the types")[1]
    assert.equal("1", r.n)
    assert.equal("1", r.affected)
    assert.equal("number:7", r.i2)
    assert.equal("number:-2147483648", r.i4)
    assert.equal("number:1e+15", r.i8)
    assert.equal("string:9007199254740993", r.big)
    assert.equal("number:-9.007199254741e+15", r.edge)
    assert.equal("string:12.50", r.num)
    assert.equal("number:42", r.num_int)
    assert.equal("number:0.1", r.f8)
    assert.equal("number:2.5", r.f4)
    assert.equal("boolean:true", r.yes)
    assert.equal("boolean:false", r.no)
    assert.equal("string:héllo", r.txt)
    assert.equal("string:v", r.vc)
    assert.equal("string:nm", r.nm)
    assert.equal('string:{"a": [1, 2]}', r.jb)
    assert.equal('string:{"b":1}', r.js)
    assert.equal("string:a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", r.id)
    assert.equal("bytes:deadbeef00ff", r.bin)
    assert.equal("string:2026-12-02T05:38:16.123Z", r.tz)
    assert.equal("string:2026-12-02T05:38:16.5", r.ts)
    assert.equal("string:2026-12-02", r.d)
    assert.equal("string:05:38:16", r.t)
    assert.equal("null", r.nothing)
    assert.equal(0, host:stop())
  end)

  it("binds hostile strings as data, and refuses NUL bytes and tables", function()
    start()
    publish('{"op":"hostile","id":1}')
    publish('{"op":"null"}')
    local r = host:wait_records({ msg = "hostile" }, 1, 20, "the hostile strings")[1]
    assert.equal(r["of"], r.same)
    assert.equal("10", r.same)
    assert.equal("false", r.nul_ok)
    assert.truthy(r.nul:find("ls.pg.query: parameter 1 holds a NUL byte", 1, true), r.nul)
    assert.equal("10", psql("SELECT count(*) FROM pg_spec_t"))
    assert.equal("it's", psql("SELECT v FROM pg_spec_t WHERE k = 101"))
    local n = host:wait_records({ msg = "null" }, 1, 20, "the nulls")[1]
    assert.equal("boolean:true", n.a)
    assert.equal("boolean:true", n.b)
    assert.equal("string:x", n.c)
    assert.equal("null", n.d)
    assert.equal("true", n.is_null)
    assert.equal("ls.pg.null", n.null)
    assert.truthy(n.bad:find("parameter 1 is a table", 1, true), n.bad)
    assert.equal(0, host:stop())
  end)

  it("says SQLSTATE: message and the query's first words, never the parameters", function()
    start()
    publish('{"op":"errors"}')
    local r = host:wait_records({ msg = "errors" }, 1, 20, "the errors")[1]
    assert.equal("nil", r.dup)
    assert.equal("nil", r.dup_state)
    assert.equal('23505: duplicate key value violates unique constraint "pg_spec_u_pkey" '
      .. "(INSERT INTO pg_spec_u (k) VALUES ($1))", r.dup2)
    assert.truthy(r.syntax:match('^42601: syntax error at or near "SELEC" %(SELEC 1%)$'), r.syntax)
    assert.truthy(r.missing:match('^42P01: relation "pg_spec_nowhere" does not exist'), r.missing)
    -- the third value: the code alone, for a handler to branch on
    assert.equal("23505", r.dup2_state)
    assert.equal("42601", r.syntax_state)
    assert.equal("42P01", r.missing_state)
    assert.equal("23505", r.tx_state)
    assert.equal("23505", r.exec_state)
    assert.equal("nil", r.own_state)
    assert.is_nil(r.dup2:find("secret-value", 1, true))
    assert.same({}, host:lines("NOTICE", true))
    assert.equal(0, host:stop())
  end)

  it("ends a query past its timeout, on the server or by closing the connection", function()
    start({ "--pg-timeout", "3s" })
    publish('{"op":"slow"}')
    local r = host:wait_records({ msg = "slow" }, 1, 30, "the slow queries")[1]
    assert.equal("57014: canceling statement due to statement timeout (SELECT pg_sleep(5))", r.server)
    assert.equal("57014: no result within 3000ms (the connection was closed) (SELECT pg_sleep(5))", r.client)
    assert.equal("57014", r.server_state)
    assert.equal("57014", r.client_state)
    assert.equal("1", r.after)
    assert.equal(0, host:stop())
  end)

  it("fails a query in flight when the server ends its connection; later ones reconnect", function()
    start()
    publish('{"op":"inflight","id":1}')
    host:wait_records({ msg = "waiting" }, 1, 20, "the query under way")
    helper.wait_until(function()
      return psql("SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(30) AS slept'") == "1"
    end, 10, "the query running on the server")
    -- what a server restart does to every connection: terminated
    psql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
      .. " WHERE datname = current_database() AND usename = current_user AND pid <> pg_backend_pid()")
    local r = host:wait_records({ msg = "inflight" }, 1, 20, "the failed query")[1]
    assert.equal("nil", r.rows)
    assert.truthy(r.err:match("^08006: .*terminating connection due to administrator command"), r.err)
    assert.truthy(r.err:match("%(SELECT pg_sleep%(30%) AS slept%)$"), r.err)
    assert.equal("08006", r.state)
    publish('{"op":"after","id":7}')
    local a = host:wait_records({ msg = "after" }, 1, 20, "a query after")[1]
    assert.equal("7", a.id)
    assert.equal(0, host:stop(5))
  end)

  it("prepares a statement again once a table it reads changed", function()
    start({ "--pg-pool", "1" })
    psql("INSERT INTO pg_spec_t (k, v) VALUES (1, 'a')")
    publish('{"op":"altered"}')
    local r = host:wait_records({ msg = "altered" }, 1, 20, "the queries")[1]
    assert.truthy(r.first:match("^0A000: cached plan must not change result type"), r.first)
    assert.equal("nil", r.again)
    assert.equal("1", r.n)
    assert.equal(0, host:stop())
  end)

  it("commits, and rolls back on nil, err, on a raise and after a failed statement", function()
    start()
    publish('{"op":"tx","id":3}')
    local r = host:wait_records({ msg = "tx" }, 1, 20, "the transactions")[1]
    assert.equal("committed", r.v)
    assert.equal("2", r.w)
    assert.equal("nil", r.nv)
    assert.equal("changed my mind", r.nerr)
    assert.equal("false", r.ok)
    assert.truthy(r.raised:find("boom", 1, true), r.raised)
    assert.equal("nil", r.fv)
    assert.truthy(r.ferr:match("^25P02: the transaction was rolled back: a statement in it failed %(23505: "), r.ferr)
    assert.equal("1", r.n)
    assert.equal("31", psql("SELECT string_agg(k::text, ',') FROM pg_spec_tx"))
    assert.equal(0, host:stop())
  end)

  it("sends tx:exec's statements with the next query or the COMMIT, and fails the transaction on their errors", function()
    start()
    publish('{"op":"exec","id":4}')
    local r = host:wait_records({ msg = "exec" }, 1, 20, "the transactions")[1]
    assert.equal("committed", r.v)
    assert.equal("3", r.seen)
    assert.equal("nil", r.fv)
    assert.truthy(r.ferr:match("^23505: duplicate key value violates unique constraint .*%(INSERT INTO pg_spec_tx %(k%) VALUES %(%$1%)%)$"), r.ferr)
    assert.equal("nil", r.qv)
    assert.truthy(r.qerr:match("^23505: .*%(INSERT INTO pg_spec_tx"), r.qerr)
    assert.equal("nil", r.rv)
    assert.equal("changed my mind", r.rerr)
    assert.equal("3", r.n)
    assert.equal("41,42,43", psql("SELECT string_agg(k::text, ',' ORDER BY k) FROM pg_spec_tx"))
    assert.equal(0, host:stop())
  end)

  it("drops deferred statements on a rollback, and forgets a preparation a failed batch cut short", function()
    start({ "--pg-pool", "1" })
    publish('{"op":"exec_edges"}')
    local r = host:wait_records({ msg = "exec_edges" }, 1, 20, "the transactions")[1]
    assert.equal("nil", r.rv)
    assert.equal("false", r.seq_called)
    assert.equal("true", r.kept)
    assert.equal("nil", r.fv)
    assert.equal("committed", r.nv)
    assert.equal("nil", r.nerr)
    assert.equal("true", r.kept_after_error)
    assert.equal("92", r.ks)
    assert.equal(0, host:stop())
  end)

  it("connects past a first address that refuses", function()
    local closed = helper.free_port()
    local url = PG:gsub("@127%.0%.0%.1:", "@127.0.0.1:" .. closed .. ",127.0.0.1:")
    assert.are_not.equal(PG, url, "the URL names 127.0.0.1")
    start({ "--pg-pool", "1", "--pg-timeout", "5s" }, { LUASTREAM_POSTGRES = url })
    publish('{"op":"after","id":7}')
    publish('{"op":"after","id":8}')
    local r = host:wait_records({ msg = "after" }, 2, 20, "two queries")
    assert.same({ "7", "nil" }, { r[1].id, tostring(r[1].err) })
    assert.same({ "8", "nil" }, { r[2].id, tostring(r[2].err) })
    assert.equal(0, host:stop())
  end)

  it("gives up a connection the server never answers, and connects anew for the next query", function()
    local silent = helper.silent_server()
    finally(silent.close)
    start({ "--pg-pool", "1", "--pg-timeout", "1s" },
      { LUASTREAM_POSTGRES = "postgresql://u@127.0.0.1:" .. silent.port .. "/db" })
    publish('{"op":"after","id":1}')
    host:wait_records({ msg = "after" }, 1, 20, "the first query")
    publish('{"op":"after","id":2}')
    local r = host:wait_records({ msg = "after" }, 2, 20, "the second query")
    assert.truthy(r[1].err:match("^57014: no connection within 1000ms"), r[1].err)
    assert.equal("57014", r[1].state)
    assert.truthy(r[2].err:match("^57014: no connection within 1000ms"), r[2].err)
    -- the first attempt was given up, not left holding the pool's one slot
    assert.equal(2, silent.connections())
    assert.equal(0, host:stop())
  end)

  it("runs ctx:pg_once once per entry: the second delivery skips", function()
    start()
    for i = 1, 5 do publish(string.format('{"op":"once","id":%d,"amount":%d}', i, i * 100)) end
    local recs = host:wait_records({ msg = "once" }, 10, 30, "two deliveries of each entry")
    local ran, skipped = {}, {}
    for _, r in ipairs(recs) do
      if r.ran == "true" then
        assert.equal("posted", r.got)
        assert.is_nil(ran[r.id], "ran twice: " .. r.id)
        ran[r.id] = true
      else
        assert.equal("false", r.ran)
        assert.equal("nil", r.got)
        skipped[r.id] = true
      end
    end
    for i = 1, 5 do
      assert.is_true(ran[tostring(i)], "ran " .. i)
      assert.is_true(skipped[tostring(i)], "skipped " .. i)
    end
    helper.wait_until(function() return #srv:pending_ids("jobs", "pg") == 0 end, 10, "all acked")
    assert.equal("5|1500", psql("SELECT count(*), sum(amount) FROM pg_spec_ledger"))
    assert.equal("5", psql("SELECT count(*) FROM pg_spec_processed WHERE stream = 'jobs' AND grp = 'pg'"))
    assert.equal(0, host:stop())
  end)

  it("uses a ctx:pg_once table made for a user that may not create tables", function()
    -- roles are made by the server's superuser (ours), or by PG's user
    local super = pg_server and function(sql) return pg_server:psql(sql) end or psql
    if super("SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = current_user") ~= "t" then
      print("SKIP: the LUASTREAM_TEST_POSTGRES user may not create roles")
      return
    end
    local function drop_role()
      super([[DO $$ BEGIN
               IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'spec_limited') THEN
                 DROP OWNED BY spec_limited; DROP ROLE spec_limited;
               END IF;
             END $$]])
    end
    drop_role()
    start({}, { LUASTREAM_POSTGRES = PG .. (PG:find("://", 1, true) and (PG:find("?", 1, true) and "&" or "?") .. "user=spec_limited&password=limited"
                                          or " user=spec_limited password=limited") })
    super([[CREATE ROLE spec_limited LOGIN PASSWORD 'limited';
           REVOKE CREATE ON SCHEMA public FROM PUBLIC;
           CREATE TABLE pg_spec_processed (stream text NOT NULL, grp text NOT NULL, id text NOT NULL,
             done_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (stream, grp, id));
           GRANT SELECT, INSERT ON pg_spec_processed, pg_spec_ledger TO spec_limited]])
    publish('{"op":"once","id":1,"amount":5}')
    local recs = host:wait_records({ msg = "once" }, 2, 20, "two deliveries")
    assert.equal("true", recs[1].ran)
    assert.equal("false", recs[2].ran)
    assert.equal("1", super("SELECT count(*) FROM pg_spec_processed"))
    assert.equal(0, host:stop())
    drop_role()
  end)

  it("refuses COPY and never lends a connection left inside a transaction or with a setting changed", function()
    start({ "--pg-pool", "1" }) -- one connection: the queries share it
    publish('{"op":"misuse"}')
    local r = host:wait_records({ msg = "misuse" }, 1, 20, "the queries")[1]
    assert.equal("nil", r.copy)
    assert.truthy(r.copy_err:match("COPY is not supported through ls.pg"), r.copy_err)
    assert.equal("true", r.fresh)
    assert.equal("true", r.kept)
    assert.equal("0", r.kept_lt)
    assert.equal("true", r.reset)
    assert.equal("0", r.reset_lt)
    assert.equal(0, host:stop())
  end)

  it("prunes ctx:pg_once rows older than --pg-once-keep", function()
    start({ "--pg-once-keep", "2s" })
    publish('{"op":"once","id":1,"amount":5}')
    host:wait_records({ msg = "once" }, 2, 20, "two deliveries")
    psql([[INSERT INTO pg_spec_processed (stream, grp, id, done_at) VALUES
             ('jobs', 'pg', 'old-1', now() - interval '1 hour'),
             ('jobs', 'pg', 'old-2', now() - interval '3 seconds')]])
    local rec = host:wait_records({ msg = "pg_once keys pruned" }, 1, 20, "a prune")[1]
    assert.equal("2", rec.count)
    assert.equal("1", psql("SELECT count(*) FROM pg_spec_processed"))
    assert.equal(0, host:stop())
  end)

  it("never logs the password", function()
    local secret = "Sekret-Pw-" .. tostring(os.time())
    -- a server that refuses connections: every query fails and is logged
    local port = helper.free_port()
    start({ "--log-level", "debug" }, { LUASTREAM_POSTGRES = "postgresql://ls:" .. secret .. "@127.0.0.1:" .. port .. "/db" })
    publish('{"op":"errors"}')
    host:wait_log("08001", 20, { plain = true })
    -- refused: no server answered, PostgreSQL's client-side code
    local r = host:wait_records({ msg = "errors" }, 1, 20, "the failed queries")[1]
    assert.equal("08001", r.dup2_state)
    assert.equal("08001", r.tx_state)
    host:wait_log('conninfo=postgresql://ls:***@127.0.0.1:' .. port .. '/db', 5, { plain = true })
    assert.equal(0, host:stop())
    local port2 = helper.free_port()
    local h2 = helper.host_start({ "--postgres", "host=127.0.0.1 port=" .. port2 .. " password=" .. secret },
                                 { server = srv, dir = helper.handlers_dir({ ["pg.lua"] = HANDLER }), env = {} })
    h2:wait_log(READY, 20, { plain = true })
    h2:wait_log("password=***", 5, { plain = true })
    assert.equal(0, h2:stop())
    helper.assert_no_secret(secret, host:log(), h2:log())
  end)
end)
