-- postgres: private PostgreSQL servers for the specs (start, stop, crash,
-- restart) and psql access to them.
--
-- Each server runs the distribution's own binaries (initdb, postgres from
-- `pg_config --bindir`, else /usr/lib/postgresql/*/bin) in a temp folder: the
-- data in DIR/data, the Unix socket in DIR, TCP on a free loopback port. It is
-- made for tests: fsync and full_page_writes are off (see SETTINGS).
--
-- PostgreSQL refuses to run as root: as root the server, initdb and the
-- folder belong to the `postgres` user the Debian package creates (setpriv
-- drops to it); as any other user they run as that user.
--
-- Roles: the superuser `postgres` logs in without a password through the
-- socket only (what srv:psql uses); the role `luastream` owns the database
-- `luastream` and logs in over TCP with a password (scram-sha-256): srv.url
-- and srv.conninfo carry it, so specs can check that it never shows in logs.
--
-- initdb takes seconds: the first server of a busted run initialises a
-- template data folder (roles and database included) and every server starts
-- from a copy of it. The template is removed when busted exits; one left by a
-- busted that was killed is removed by the next run.
--
-- Every server is registered like those of redis.redis_start, so
-- helper.cleanup() stops it (and with it every process of the server) even
-- when a spec fails, then removes its folder. The postmaster runs under
-- `setpriv --pdeathsig KILL`: it dies with busted too, and its backends
-- follow it.
local ffi = require "ffi"
local sys = require "tests.integration.support.sys"
local files = require "tests.integration.support.files"
local processes = require "tests.integration.support.processes"
local ports = require "tests.integration.support.ports"
local registry = require "tests.integration.support.registry"

-- PostgreSQL's programs run without the sanitizers' preload a spec may run
-- under (busted with LD_PRELOAD=libasan: psql hangs there).
local function unpreloaded(opts)
  opts = opts or {}
  opts.env = opts.env or {}
  opts.env.LD_PRELOAD = false
  return opts
end

pcall(ffi.cdef, "unsigned int geteuid(void);")
pcall(ffi.cdef, "int chown(const char *path, unsigned int uid, unsigned int gid);")

local C = sys.C
local postgres = {}

local Server = {}
Server.__index = Server
postgres.Server = Server

local START_TIMEOUT_S = 30
local STOP_GRACE_S = 10
local SUPERUSER = "postgres"
postgres.ROLE = "luastream"
postgres.DATABASE = "luastream"

-- Settings for a throwaway server: nothing waits for the disk. A commit is
-- still written (not synced) to the WAL before it returns
-- (synchronous_commit stays on), so what a client saw committed survives a
-- SIGKILL of the server (srv:kill), as it would a crash.
local SETTINGS = {
  "listen_addresses=127.0.0.1",
  "fsync=off", "full_page_writes=off",
  "max_connections=200", "shared_buffers=32MB",
  "logging_collector=off", "log_destination=stderr",
}

local HBA = table.concat({
  "# superuser setup through the socket only; the test role with its password",
  "local all " .. SUPERUSER .. " trust",
  "local all all scram-sha-256",
  "host all all 127.0.0.1/32 scram-sha-256",
  "",
}, "\n")

-- ---- binaries and the user to run them as -----------------------------------

local function executable(path) return C.access(path, 1) == 0 end

--- The folder holding initdb and postgres, or nil.
function postgres.bindir()
  local p = io.popen("pg_config --bindir 2>/dev/null")
  local dir = p and files.trim(p:read("*a") or "") or ""
  if p then p:close() end
  if dir ~= "" and executable(dir .. "/initdb") and executable(dir .. "/postgres") then return dir end
  p = io.popen("ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r")
  local list = p and p:read("*a") or ""
  if p then p:close() end
  for d in list:gmatch("[^\n]+") do
    if executable(d .. "/initdb") and executable(d .. "/postgres") then return d end
  end
  return nil
end

local function is_root() return C.geteuid() == 0 end

-- uid, gid of the `postgres` user, or nil.
local function postgres_user()
  local p = io.popen("getent passwd " .. SUPERUSER .. " 2>/dev/null")
  local line = p and p:read("*l")
  if p then p:close() end
  local uid, gid = (line or ""):match("^[^:]*:[^:]*:(%d+):(%d+):")
  return tonumber(uid), tonumber(gid)
end

-- The argv prefix that runs a command as the server's user: setpriv drops
-- root to `postgres` (and keeps the pdeathsig, which it sets after the switch).
local function as_server_user(pdeathsig)
  local argv = { "setpriv" }
  if pdeathsig then
    argv[#argv + 1] = "--pdeathsig"
    argv[#argv + 1] = "KILL"
  end
  if is_root() then
    for _, a in ipairs { "--reuid=" .. SUPERUSER, "--regid=" .. SUPERUSER, "--init-groups" } do
      argv[#argv + 1] = a
    end
  end
  argv[#argv + 1] = "--"
  return argv
end

local function concat(a, b)
  local out = {}
  for _, x in ipairs(a) do out[#out + 1] = x end
  for _, x in ipairs(b) do out[#out + 1] = x end
  return out
end

-- A folder the server's user owns (mode 700).
local function own(dir)
  if is_root() then
    local uid, gid = postgres_user()
    if C.chown(dir, uid, gid) ~= 0 then
      error("cannot chown " .. dir .. " to " .. SUPERUSER .. ": " .. ffi.string(C.strerror(ffi.errno())), 3)
    end
  end
  C.chmod(dir, tonumber("700", 8))
end

-- Why a server cannot be started here, or nil.
local function missing()
  if not postgres.bindir() then
    return "PostgreSQL's initdb and postgres were not found (pg_config --bindir, /usr/lib/postgresql/*/bin): "
      .. "this test starts its own server (install it, e.g. apt-get install postgresql)"
  end
  if not sys.on_path("setpriv") then return "setpriv (util-linux) is not on PATH" end
  if is_root() and not postgres_user() then
    return "running as root and there is no `" .. SUPERUSER .. "` user to run PostgreSQL as "
      .. "(the postgresql package creates it)"
  end
  if not sys.on_path("psql") then return "psql is not on PATH (apt-get install postgresql-client)" end
  return nil
end

--[[ Skips the running spec when PostgreSQL is not installed: says why on
stderr and marks the test pending (busted's skip). With LUASTREAM_REQUIRE_REDIS
set (./dev test, where every test must run) it is an error instead; outside
busted too. ]]
function postgres.require_server()
  local why = missing()
  if not why then return end
  sys.skip_missing(why)
end

-- ---- processes ----------------------------------------------------------------

-- Is pid running (a zombie does not count: it holds no memory and no port)?
local function pid_running(pid)
  local state = processes.proc_state(pid)
  return state ~= nil and state ~= "Z"
end
postgres.pid_running = pid_running

-- The pids whose parent is pid (a postmaster's backends and helpers: each
-- leads a process group of its own, so they are found by parent).
local function children(pid)
  local p = io.popen("ls /proc")
  local list = p:read("*a")
  p:close()
  local out = {}
  for child in list:gmatch("%d+") do
    local f = io.open("/proc/" .. child .. "/stat")
    if f then
      local ppid = (f:read("*a") or ""):match("^%d+ %b() %S (%d+)")
      f:close()
      if tonumber(ppid) == pid then out[#out + 1] = tonumber(child) end
    end
  end
  return out
end

-- Waits until none of pids runs; false after timeout_s.
local function wait_gone(pids, timeout_s)
  local deadline = sys.now() + timeout_s
  for _, pid in ipairs(pids) do
    while pid_running(pid) do
      if sys.now() >= deadline then return false end
      sys.pause(10)
    end
  end
  return true
end

-- SIGKILL to a postmaster and its children, stopped first so that it forks
-- no new one meanwhile; waits until they are gone (a new postmaster refuses
-- to start while an old backend holds the shared memory). False after 10 s.
local function kill_server(proc)
  if not proc:alive() then return true end
  C.kill(proc.pid, sys.SIGNALS.STOP)
  local pids = children(proc.pid)
  for _, pid in ipairs(pids) do C.kill(pid, sys.SIGNALS.KILL) end
  C.kill(proc.pid, sys.SIGNALS.KILL)
  proc:wait(10)
  return wait_gone(pids, 10)
end

-- The status line in postmaster.pid ("ready" once it accepts connections)
-- when the file is that of postmaster pid (a crash leaves the old one), or nil.
local function pm_status(data, pid)
  local f = io.open(data .. "/postmaster.pid")
  if not f then return nil end
  local text = f:read("*a") or ""
  f:close()
  local lines = {}
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do lines[#lines + 1] = line end
  if tonumber(lines[1]) ~= pid then return nil end
  return lines[8] and files.trim(lines[8]) or nil
end

-- Starts a postmaster on data (a folder the server's user owns), socket in
-- sockdir, logging to log; waits until it accepts connections. Returns the
-- Proc, or nil and why (the log's tail).
local function launch(bindir, data, sockdir, port, log, settings)
  -- The log gathers every start: sh (already the server's user) appends to
  -- it and execs postgres, which keeps the pid.
  local argv = concat(as_server_user(true), {
    "sh", "-c", 'exec "$@" >>"$0" 2>&1', log,
    bindir .. "/postgres", "-D", data, "-p", tostring(port), "-k", sockdir,
  })
  for _, list in ipairs { SETTINGS, settings or {} } do
    for _, s in ipairs(list) do
      argv[#argv + 1] = "-c"
      argv[#argv + 1] = s
    end
  end
  local before = files.file_exists(log) and #files.read_file(log) or 0
  local proc = processes.spawn(argv, unpreloaded())
  local deadline = sys.now() + START_TIMEOUT_S
  while sys.now() < deadline do
    if not proc:alive() then
      local text = files.file_exists(log) and files.read_file(log):sub(before + 1) or ""
      return nil, "postgres exited (code " .. tostring(proc.code) .. "):\n" .. files.tail(text, 15)
    end
    if pm_status(data, proc.pid) == "ready" then return proc end
    sys.pause(10)
  end
  kill_server(proc)
  return nil, "postgres did not accept connections within " .. START_TIMEOUT_S .. " s:\n"
    .. files.tail(files.file_exists(log) and files.read_file(log):sub(before + 1) or "", 15)
end

local function psql_argv(sockdir, port, db)
  return { "psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
    "-h", sockdir, "-p", tostring(port), "-U", SUPERUSER, "-d", db }
end

-- Runs sql through psql as the superuser (socket); returns the output or errors.
local function psql(sockdir, port, db, sql, level)
  local code, out, err = processes.run(psql_argv(sockdir, port, db), unpreloaded {
    stdin = sql, timeout = 60, env = { PGPASSWORD = false, PGSERVICE = false, PGOPTIONS = false },
  })
  if code ~= 0 then error(string.format("psql failed (%d): %s%s", code, out, err), level + 1) end
  return files.trim(out)
end

-- ---- the template -------------------------------------------------------------

local function random_password()
  local f = assert(io.open("/dev/urandom", "rb"))
  local bytes = f:read(12)
  f:close()
  return (bytes:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end

-- Removes templates of busted runs that are gone (killed before their exit).
local function sweep_templates(root)
  local p = io.popen("ls -d " .. files.shell_quote(root) .. "/luastream-pgtemplate-* 2>/dev/null")
  local list = p:read("*a")
  p:close()
  for dir in list:gmatch("[^\n]+") do
    local pid = tonumber(dir:match("luastream%-pgtemplate%-(%d+)%-"))
    if pid and pid ~= C.getpid() and C.kill(pid, 0) ~= 0 and ffi.errno() == 3 then -- ESRCH
      os.execute("rm -rf " .. files.shell_quote(dir))
    end
  end
end

--[[ The run's template: an initialised data folder with the role and database,
made once per busted run. busted reloads the support modules for every spec
file, so it is kept in the Lua registry, with a proxy whose finaliser removes
it when busted closes its state at exit. ]]
local function template()
  local reg = debug.getregistry()
  if reg.luastream_pg_template then return reg.luastream_pg_template end
  local bindir = postgres.bindir()
  local root = os.getenv("TMPDIR") or "/tmp"
  sweep_templates(root)
  local buf = ffi.new("char[?]", 256)
  ffi.copy(buf, string.format("%s/luastream-pgtemplate-%d-XXXXXX", root, C.getpid()))
  assert(C.mkdtemp(buf) ~= nil, "mkdtemp failed")
  local dir = ffi.string(buf)
  local t = { dir = dir, data = dir .. "/data", bindir = bindir, password = random_password() }
  local gone = newproxy(true)
  getmetatable(gone).__gc = function() os.execute("rm -rf " .. files.shell_quote(dir)) end
  t.proxy = gone
  local ok, err = pcall(function()
    own(dir)
    local code, out, e = processes.run(concat(as_server_user(false), {
      bindir .. "/initdb", "-D", t.data, "-U", SUPERUSER, "-A", "trust", "-E", "UTF8",
      "--locale=C", "--no-sync",
    }), unpreloaded { timeout = 120 })
    if code ~= 0 then error("initdb failed (" .. code .. "):\n" .. files.tail(out .. e, 20), 0) end
    files.write_file(t.data .. "/pg_hba.conf", HBA)
    local port = ports.free_port()
    local proc, why = launch(bindir, t.data, dir, port, dir .. "/template.log")
    if not proc then error(why, 0) end
    local ok2, err2 = pcall(psql, dir, port, "postgres", string.format(
      "CREATE ROLE %s LOGIN PASSWORD '%s';\nCREATE DATABASE %s OWNER %s;\n",
      postgres.ROLE, t.password, postgres.DATABASE, postgres.ROLE), 1)
    proc:kill("INT") -- fast shutdown: a clean checkpoint, the copies start at once
    proc:wait(STOP_GRACE_S)
    kill_server(proc)
    if not ok2 then error(err2, 0) end
  end)
  if not ok then
    os.execute("rm -rf " .. files.shell_quote(dir))
    getmetatable(gone).__gc = nil
    error("cannot initialise a PostgreSQL data folder: " .. tostring(err), 3)
  end
  reg.luastream_pg_template = t
  return t
end

-- ---- servers ------------------------------------------------------------------

local function conninfo(port, password)
  return string.format("host=127.0.0.1 port=%d dbname=%s user=%s password=%s",
    port, postgres.DATABASE, postgres.ROLE, password)
end

local function url(port, password)
  return string.format("postgresql://%s:%s@127.0.0.1:%d/%s", postgres.ROLE, password, port, postgres.DATABASE)
end

function Server:_set_port(port)
  self.port = port
  self.url = url(port, self.password)
  self.url_redacted = url(port, "***")
  self.conninfo = conninfo(port, self.password)
end

--[[ Starts a private PostgreSQL on a free loopback port in a temp folder and
waits until it accepts connections. Returns a server:
  srv.url        postgresql://luastream:PASSWORD@127.0.0.1:PORT/luastream
  srv.url_redacted  the same with *** for the password
  srv.conninfo   the same as a libpq keyword string
  srv.password, srv.port, srv.dir (the socket's folder; data in srv.dir/data)
  srv:psql(sql, opts)  runs sql (a script, several statements) and returns
                 psql's output, trimmed (unaligned, tuples only: one row a
                 line, columns separated by |); errors if psql fails. By default as
                 the superuser through the socket; opts.tcp = true logs in as
                 the test role over TCP with its password; opts.db names
                 another database.
  srv:stop(), srv:kill() (SIGKILL: a crash), srv:restart() (same port and
  data), srv:alive() (the postmaster runs), srv:pids() (the postmaster and
  its children), srv.log (the server's log, every start appended).
opts: port (a fixed port), settings (more server settings, kept across
restarts, e.g. {"synchronous_commit=off", "log_statement=all"}). ]]
function postgres.start(opts)
  opts = opts or {}
  postgres.require_server()
  local t = template()
  local dir = files.tmpdir("pg")
  own(dir)
  local code, out, err = processes.run({ "cp", "-a", t.data, dir .. "/data" }, unpreloaded { timeout = 60 })
  if code ~= 0 then error("cannot copy the template data folder: " .. out .. err, 2) end
  local srv = setmetatable({ dir = dir, data = dir .. "/data", bindir = t.bindir, password = t.password,
    log = dir .. "/postgres.log", settings = opts.settings }, Server)
  local last_err
  for _ = 1, 8 do
    srv:_set_port(opts.port or ports.free_port())
    local proc, why = launch(srv.bindir, srv.data, dir, srv.port, srv.log, srv.settings)
    if proc then
      srv.proc = proc
      registry.servers[#registry.servers + 1] = srv
      return srv
    end
    last_err = why
    if opts.port or not why:find("in use", 1, true) then break end
  end
  error("cannot start postgres: " .. tostring(last_err), 2)
end

--- Is the postmaster running?
function Server:alive() return self.proc ~= nil and self.proc:alive() end

--- Fast shutdown (SIGINT: sessions are ended, a checkpoint is written; the
--- postmaster exits after its children); killed if not down within 10 s.
function Server:stop()
  if not self.proc then return end
  if self.proc:alive() then
    self.proc:kill("INT")
    self.proc:wait(STOP_GRACE_S)
  end
  self:kill()
end

--- SIGKILL to the postmaster and every backend: the server vanishes the way a
--- crash makes it vanish; a restart recovers from the WAL.
function Server:kill()
  if self.proc and not kill_server(self.proc) then
    error("processes of postgres (postmaster " .. self.proc.pid .. ") still run 10 s after SIGKILL", 2)
  end
end

--- Starts the server again on the same port and data (after a stop or a kill).
function Server:restart()
  if self:alive() then self:stop() end
  local err
  for _ = 1, 20 do
    local proc
    proc, err = launch(self.bindir, self.data, self.dir, self.port, self.log, self.settings)
    if proc then
      self.proc = proc
      return self
    end
    if not err:find("in use", 1, true) then break end
    sys.pause(100)
  end
  error("cannot restart postgres on port " .. self.port .. ": " .. tostring(err), 2)
end

--- The pids of the server's processes: the postmaster and its children
--- (empty when it is not running).
function Server:pids()
  if not self:alive() then return {} end
  local pids = children(self.proc.pid)
  table.insert(pids, 1, self.proc.pid)
  return pids
end

function Server:psql(sql, opts)
  opts = opts or {}
  if not opts.tcp then return psql(self.dir, self.port, opts.db or postgres.DATABASE, sql, 2) end
  local argv = { "psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
    "-h", "127.0.0.1", "-p", tostring(self.port), "-U", postgres.ROLE, "-d", opts.db or postgres.DATABASE }
  -- the password in the environment, never in argv (ps)
  local code, out, err = processes.run(argv, unpreloaded { stdin = sql, timeout = 60,
    env = { PGPASSWORD = self.password, PGSERVICE = false, PGOPTIONS = false } })
  if code ~= 0 then error(string.format("psql failed (%d): %s%s", code, out, err), 2) end
  return files.trim(out)
end

-- The names the integration helper gives the specs.
postgres.postgres_start = postgres.start
postgres.require_postgres = postgres.require_server

return postgres
