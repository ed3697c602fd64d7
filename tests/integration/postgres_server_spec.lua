-- The integration helper's private PostgreSQL servers (support/postgres.lua):
-- started on a free port, reachable over TCP with the test role's password,
-- data kept across a restart and a crash, and nothing left after cleanup.
-- Needs PostgreSQL, not the luastream binary.
local helper = require "tests.integration.helper"
local postgres = require "tests.integration.support.postgres"

local function dir_exists(path) return os.execute("test -d " .. path) == 0 end

local function none_running(pids)
  for _, pid in ipairs(pids) do
    if postgres.pid_running(pid) then return false end
  end
  return true
end

describe("private postgres server", function()
  after_each(helper.cleanup)

  it("starts on a free loopback port with a password-protected role over TCP", function()
    local srv = helper.postgres_start()
    assert.is_true(srv.port > 1024)
    assert.equal(24, #srv.password)
    assert.equal(string.format("postgresql://luastream:%s@127.0.0.1:%d/luastream", srv.password, srv.port), srv.url)
    assert.equal(string.format("postgresql://luastream:***@127.0.0.1:%d/luastream", srv.port), srv.url_redacted)
    assert.equal(string.format("host=127.0.0.1 port=%d dbname=luastream user=luastream password=%s",
      srv.port, srv.password), srv.conninfo)
    assert.is_true(srv:alive())
    assert.equal("postgres|t", srv:psql("SELECT current_user, current_setting('fsync') = 'off'"))
    assert.equal("luastream|luastream|15", srv:psql(
      "SELECT current_user, current_database(), current_setting('server_version_num')::int / 10000",
      { tcp = true }))
    -- psql with the URL itself (libpq parses it), as a client given --postgres would
    local code, out = helper.run({ "psql", "-X", "-A", "-t", "-c", "SELECT 42", srv.url })
    assert.equal(0, code)
    assert.equal("42", helper.trim(out))
  end)

  it("refuses a wrong password over TCP and the superuser over TCP", function()
    local srv = helper.postgres_start()
    local code, _, err = helper.run({ "psql", "-X", "-h", "127.0.0.1", "-p", tostring(srv.port),
      "-U", "luastream", "-d", "luastream", "-c", "SELECT 1" }, { env = { PGPASSWORD = "wrong" } })
    assert.is_not.equal(0, code)
    assert.matches("password authentication failed", err)
    code, _, err = helper.run({ "psql", "-X", "-h", "127.0.0.1", "-p", tostring(srv.port),
      "-U", "postgres", "-d", "luastream", "-c", "SELECT 1" }, { env = { PGPASSWORD = "" } })
    assert.is_not.equal(0, code)
    assert.matches("password", err)
  end)

  it("keeps its data across a restart and a crash", function()
    local srv = helper.postgres_start()
    local port = srv.port
    srv:psql("CREATE TABLE ledger (id bigint PRIMARY KEY, cents bigint NOT NULL);"
      .. "INSERT INTO ledger VALUES (1, 500), (2, 12500);", { tcp = true })
    local pids = srv:pids()
    assert.is_true(#pids >= 5) -- the postmaster, checkpointer, walwriter, ...
    srv:stop()
    assert.is_false(srv:alive())
    assert.is_true(none_running(pids))
    srv:restart()
    assert.equal(port, srv.port)
    assert.equal("2|13000", srv:psql("SELECT count(*), sum(cents) FROM ledger"))

    -- a committed row survives SIGKILL of every server process (the WAL is
    -- written at commit, though not synced)
    srv:psql("INSERT INTO ledger VALUES (3, 1)", { tcp = true })
    -- with a session open: its backend is killed too
    local psql = helper.spawn({ "psql", "-X", "-c", "SELECT pg_sleep(60)", srv.url },
      { pdeathsig = true, stderr = "/dev/null" })
    helper.wait_until(function()
      return srv:psql("SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep%'") == "1"
    end, 10, "the session to start")
    pids = srv:pids()
    srv:kill()
    assert.is_false(srv:alive())
    assert.is_true(none_running(pids))
    assert.is_not_nil(psql:wait(10))
    local code = helper.run({ "psql", "-X", "-c", "SELECT 1", srv.url })
    assert.is_not.equal(0, code)
    srv:restart()
    assert.is_not.equal(pids[1], srv:pids()[1])
    assert.equal("3|13001", srv:psql("SELECT count(*), sum(cents) FROM ledger"))
    assert.matches("automatic recovery in progress", helper.read_file(srv.log))
  end)

  it("is stopped and removed by cleanup, every server process included", function()
    local a = helper.postgres_start()
    local b = helper.postgres_start()
    assert.is_not.equal(a.port, b.port)
    -- a session open in a backend: cleanup must end it too
    local psql = helper.spawn({ "psql", "-X", "-c", "SELECT pg_sleep(60)", a.url },
      { pdeathsig = true, stderr = "/dev/null" })
    helper.wait_until(function()
      return a:psql("SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep%'") == "1"
    end, 10, "the session to start")
    local pids = { a = a:pids(), b = b:pids() }
    helper.cleanup()
    for name, srv in pairs { a = a, b = b } do
      assert.is_false(srv:alive())
      assert.is_true(none_running(pids[name]))
      assert.is_false(dir_exists(srv.dir))
      assert.is_false(helper.port_open(srv.port))
    end
    assert.is_not_nil(psql:wait(10))
  end)

  it("takes more settings, kept across a restart", function()
    local srv = helper.postgres_start({ settings = { "synchronous_commit=off", "work_mem=7MB" } })
    assert.equal("off|7MB", srv:psql("SELECT current_setting('synchronous_commit'), current_setting('work_mem')"))
    srv:restart()
    assert.equal("off|7MB", srv:psql("SELECT current_setting('synchronous_commit'), current_setting('work_mem')"))
  end)

  it("never puts the password in its log", function()
    local srv = helper.postgres_start({ settings = { "log_connections=on" } })
    srv:psql("SELECT 1", { tcp = true })
    srv:restart()
    assert.matches("connection authorized: user=luastream", helper.read_file(srv.log))
    assert.is_nil(helper.read_file(srv.log):find(srv.password, 1, true))
  end)

  it("finds the PostgreSQL binaries", function()
    local bindir = postgres.bindir()
    assert.is_not_nil(bindir)
    assert.equal(0, helper.run({ "test", "-x", bindir .. "/initdb" }))
  end)
end)
