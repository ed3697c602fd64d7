-- helper: what the integration specs need to drive the real luastream binary
-- against a real redis-server.
--
-- Everything here waits on conditions with deadlines (polling every ~20 ms),
-- never on fixed sleeps, and every process it starts is registered so that
-- helper.cleanup() (call it from after_each) stops it even when a spec fails.
-- Long-lived children (redis-server, hosts, MONITOR) are started under
-- `setpriv --pdeathsig KILL`, so they also die if busted itself is killed.
--
-- Load it from the repository root (busted runs there):
--   local helper = require "tests.integration.helper"
--
-- Redis access comes in two shapes:
--   srv:cli(...)   redis-cli's raw output, trimmed: a string ("PONG", "3", an id;
--                  arrays come one element per line). Good for scalars.
--   srv:call(...)  the reply decoded from `redis-cli --json` (RESP3): arrays are
--                  Lua arrays, maps (XINFO ...) are tables keyed by name, nil
--                  for a null reply; a Redis error returns nil, message.
-- plus shortcuts: srv:xlen, srv:xrange (entries as {id=, fields={}}),
-- srv:pending_ids, srv:group, srv:pipe (many commands through one redis-cli).
--
-- Host logs are logfmt lines; h:records(filter) returns them parsed (each
-- record has the fields plus _line, the raw text, and _pos, the byte offset just
-- past the line, comparable with h:mark()).
--
-- Environment: LUASTREAM_BIN (default build/luastream) is the binary under test;
-- LUASTREAM_KEEP_TMP=1 keeps the temp folders (logs, redis data) for a look.
local ffi = require "ffi"
local bit = require "bit"
local cjson = require "cjson"

local helper = {}

-- ---- C functions ---------------------------------------------------------
-- Anonymous typedefs only: busted reloads this module for every spec file, and
-- LuaJIT refuses to redefine a named struct but accepts these repeated.
for _, decl in ipairs {
  "typedef struct { long tv_sec; long tv_nsec; } ls_timespec;",
  "int clock_gettime(int clk, ls_timespec *ts);",
  "int poll(void *fds, unsigned long nfds, int timeout);",
  "int kill(int pid, int sig);",
  "int waitpid(int pid, int *status, int options);",
  "int getpid(void);",
  "int chmod(const char *path, unsigned int mode);",
  "char *mkdtemp(char *template);",
  "char *strerror(int errnum);",
  -- glibc's posix_spawn_file_actions_t is 80 bytes; leave it room.
  "typedef struct { uint64_t opaque[32]; } ls_spawn_actions;",
  "int posix_spawn_file_actions_init(ls_spawn_actions *fa);",
  "int posix_spawn_file_actions_destroy(ls_spawn_actions *fa);",
  "int posix_spawn_file_actions_addopen(ls_spawn_actions *fa, int fd, const char *path, int oflag, unsigned int mode);",
  "int posix_spawn_file_actions_adddup2(ls_spawn_actions *fa, int fd, int newfd);",
  "int posix_spawnp(int *pid, const char *file, const ls_spawn_actions *fa, const void *attr, char *const argv[], char *const envp[]);",
  "extern char **environ;",
  "typedef struct { uint16_t family; uint16_t port; uint32_t addr; uint8_t zero[8]; } ls_sockaddr_in;",
  "int socket(int domain, int type, int protocol);",
  "int setsockopt(int fd, int level, int name, const void *val, unsigned int len);",
  "int bind(int fd, const void *addr, unsigned int len);",
  "int connect(int fd, const void *addr, unsigned int len);",
  "int close(int fd);",
  "typedef struct { uint16_t family; uint16_t port; uint32_t flowinfo; uint8_t addr[16]; uint32_t scope; } ls_sockaddr_in6;",
  "typedef struct { int fd; short events; short revents; } ls_pollfd;",
  "long write(int fd, const void *buf, unsigned long n);",
  "long read(int fd, void *buf, unsigned long n);",
} do
  pcall(ffi.cdef, decl)
end
local C = ffi.C

local CLOCK_MONOTONIC = 1
local WNOHANG = 1
local O_RDONLY, O_WRONLY, O_CREAT, O_TRUNC = 0, 1, 64, 512
local AF_INET, AF_INET6, SOCK_STREAM, SOL_SOCKET, SO_REUSEADDR = 2, 10, 1, 1, 2
local POLLIN = 1
local SIGNALS = { HUP = 1, INT = 2, QUIT = 3, KILL = 9, USR1 = 10, USR2 = 12, TERM = 15, CONT = 18, STOP = 19 }

local POLL_MS = 20

-- ---- small utilities -----------------------------------------------------

--- Monotonic time in seconds (fractional).
function helper.now()
  local ts = ffi.new("ls_timespec")
  C.clock_gettime(CLOCK_MONOTONIC, ts)
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) / 1e9
end

local function pause(ms) C.poll(nil, 0, ms) end

function helper.trim(s) return (s:gsub("^%s+", ""):gsub("%s+$", "")) end

local function shell_quote(s)
  s = tostring(s)
  if s:match("^[%w%._/:=,@%-]+$") then return s end
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

function helper.read_file(path)
  local f, err = io.open(path, "rb")
  if not f then error("cannot read " .. tostring(err), 2) end
  local s = f:read("*a")
  f:close()
  return s
end

function helper.write_file(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

local function file_exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

local function tail(text, n)
  local lines = {}
  for line in ((text or "") .. "\n"):gmatch("([^\n]*)\n") do lines[#lines + 1] = line end
  while #lines > 0 and lines[#lines] == "" do lines[#lines] = nil end
  local first = math.max(1, #lines - n + 1)
  return table.concat(lines, "\n", first)
end

-- The repository root, from this file's location (tests/integration/helper.lua).
local function repo_root()
  local src = debug.getinfo(1, "S").source:gsub("^@", "")
  if src:sub(1, 1) ~= "/" then
    local p = io.popen("pwd")
    local cwd = helper.trim(p:read("*a"))
    p:close()
    src = cwd .. "/" .. src
  end
  local dir = src:gsub("/[^/]*$", "")
  dir = dir .. "/../.."
  -- normalise a/b/../.. without touching the file system
  local parts = {}
  for part in dir:gmatch("[^/]+") do
    if part == ".." then parts[#parts] = nil
    elseif part ~= "." then parts[#parts + 1] = part end
  end
  return "/" .. table.concat(parts, "/")
end
helper.repo_root = repo_root()

-- ---- registry of what must be cleaned up ---------------------------------

local live = { hosts = {}, servers = {}, procs = {}, dirs = {} }

local TMP_ROOT = os.getenv("TMPDIR") or "/tmp"

--- Creates a fresh temp folder (removed by helper.cleanup()).
function helper.tmpdir(tag)
  local template = ffi.new("char[?]", 256)
  ffi.copy(template, string.format("%s/luastream-%s-XXXXXX", TMP_ROOT, tag or "test"))
  local p = C.mkdtemp(template)
  if p == nil then error("mkdtemp failed: " .. ffi.string(C.strerror(ffi.errno())), 2) end
  local dir = ffi.string(p)
  live.dirs[#live.dirs + 1] = dir
  return dir
end

--- Writes {name = source} handler files into a fresh folder and returns its path.
function helper.handlers_dir(files)
  local dir = helper.tmpdir("handlers")
  for name, src in pairs(files) do
    helper.write_file(dir .. "/" .. name, src)
  end
  return dir
end

--- The 1-based line of the first line in src that contains `needle` (plain).
function helper.line_of(src, needle)
  local n = 0
  for line in (src .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    if line:find(needle, 1, true) then return n end
  end
  error("no line contains " .. needle, 2)
end

-- ---- processes -----------------------------------------------------------

local HAVE_SETPRIV
do
  local r = os.execute("command -v setpriv >/dev/null 2>&1")
  HAVE_SETPRIV = r == 0 or r == true
end

-- The current environment with overrides applied (value false removes a name).
local function build_env(overrides)
  local env, order = {}, {}
  local i = 0
  while C.environ[i] ~= nil do
    local kv = ffi.string(C.environ[i])
    local k = kv:match("^([^=]*)=")
    if k and not env[k] then order[#order + 1] = k end
    if k then env[k] = kv end
    i = i + 1
  end
  for k, v in pairs(overrides or {}) do
    if v == false then env[k] = nil
    else
      if not env[k] then order[#order + 1] = k end
      env[k] = k .. "=" .. tostring(v)
    end
  end
  local list = {}
  for _, k in ipairs(order) do
    if env[k] then list[#list + 1] = env[k] end
  end
  return list
end

local function cstrings(list)
  local arr = ffi.new("char *[?]", #list + 1)
  for i, s in ipairs(list) do arr[i - 1] = ffi.cast("char *", s) end
  arr[#list] = nil
  return arr
end

local Proc = {}
Proc.__index = Proc

--[[ Starts argv (a list; argv[1] is looked up in PATH) without a shell.
opts: stdin = path (default /dev/null); stdout = path; stderr = path or
"stdout" (same file); env = overrides ({NAME = value | false}); pdeathsig =
true to have the child killed when this process dies. Returns a Proc. ]]
function helper.spawn(argv, opts)
  opts = opts or {}
  local args = {}
  if opts.pdeathsig and HAVE_SETPRIV then
    args = { "setpriv", "--pdeathsig", "KILL", "--" }
  end
  for _, a in ipairs(argv) do args[#args + 1] = tostring(a) end
  local env = build_env(opts.env)
  local fa = ffi.new("ls_spawn_actions")
  C.posix_spawn_file_actions_init(fa)
  C.posix_spawn_file_actions_addopen(fa, 0, opts.stdin or "/dev/null", O_RDONLY, 0)
  C.posix_spawn_file_actions_addopen(fa, 1, opts.stdout or "/dev/null", O_WRONLY + O_CREAT + O_TRUNC, 420)
  if opts.stderr == "stdout" then
    C.posix_spawn_file_actions_adddup2(fa, 1, 2)
  elseif opts.stderr then
    C.posix_spawn_file_actions_addopen(fa, 2, opts.stderr, O_WRONLY + O_CREAT + O_TRUNC, 420)
  end
  local pid = ffi.new("int[1]")
  local c_argv, c_env = cstrings(args), cstrings(env)
  local rc = C.posix_spawnp(pid, args[1], fa, nil, c_argv, c_env)
  C.posix_spawn_file_actions_destroy(fa)
  -- keep the strings alive until the call returned
  local _ = { args, env, c_argv, c_env }
  if rc ~= 0 then
    error(string.format("cannot start %s: %s", args[1], ffi.string(C.strerror(rc))), 2)
  end
  return setmetatable({ pid = pid[0], argv = args }, Proc)
end

--- Non-blocking: true, code, signal once the process has ended.
function Proc:poll()
  if self.code then return true, self.code, self.signal end
  local status = ffi.new("int[1]")
  local r = C.waitpid(self.pid, status, WNOHANG)
  if r == self.pid then
    local st = status[0]
    local sig = bit.band(st, 0x7f)
    if sig == 0 then
      self.code = bit.band(bit.rshift(st, 8), 0xff)
    else
      self.signal = sig
      self.code = 128 + sig
    end
    return true, self.code, self.signal
  elseif r < 0 then
    -- not our child any more (already reaped): treat as gone
    self.code = self.code or -1
    return true, self.code, nil
  end
  return false
end

function Proc:alive() return not (self:poll()) end

--- Waits up to timeout_s for the end; returns code, signal or nil on timeout.
function Proc:wait(timeout_s)
  local deadline = helper.now() + (timeout_s or 10)
  while true do
    local done, code, sig = self:poll()
    if done then return code, sig end
    if helper.now() >= deadline then return nil end
    pause(5)
  end
end

function Proc:kill(sig)
  if self:alive() then C.kill(self.pid, SIGNALS[sig or "TERM"] or sig) end
end

--- TERM, then KILL after grace_s; returns the exit code.
function Proc:terminate(grace_s)
  if self:alive() then
    self:kill("TERM")
    local code = self:wait(grace_s or 5)
    if code then return code end
    self:kill("KILL")
  end
  return self:wait(5)
end

--[[ Runs one command to its end. cmd: an argv list, or a string run by /bin/sh -c.
opts: stdin (a string fed to it), env (overrides; REDIS_URL is removed unless
given), timeout (seconds, default 60: the command is killed and this errors).
Returns exit code, stdout, stderr. ]]
function helper.run(cmd, opts)
  opts = opts or {}
  local argv = type(cmd) == "table" and cmd or { "/bin/sh", "-c", cmd }
  local out, err = os.tmpname(), os.tmpname()
  local inp
  if opts.stdin then
    inp = os.tmpname()
    helper.write_file(inp, opts.stdin)
  end
  local env = { REDIS_URL = false }
  for k, v in pairs(opts.env or {}) do env[k] = v end
  local p = helper.spawn(argv, { stdin = inp, stdout = out, stderr = err, env = env })
  local code = p:wait(opts.timeout or 60)
  if not code then
    p:kill("KILL")
    p:wait(5)
  end
  local o, e = helper.read_file(out), helper.read_file(err)
  os.remove(out)
  os.remove(err)
  if inp then os.remove(inp) end
  if not code then
    error(string.format("command timed out after %ss: %s\nstdout: %s\nstderr: %s",
      opts.timeout or 60, table.concat(argv, " "), tail(o, 20), tail(e, 20)), 2)
  end
  return code, o, e
end

--- Polls fn every ~20 ms until it returns a true value (returned), or errors
--- naming `what` once timeout_s has passed. fn may return false, detail to
--- have the last detail in the error.
function helper.wait_until(fn, timeout_s, what)
  local deadline = helper.now() + (timeout_s or 10)
  local detail
  while true do
    local v, d = fn()
    if v then return v end
    detail = d
    if helper.now() >= deadline then
      error(string.format("timed out after %ss waiting for %s%s", timeout_s or 10,
        what or "a condition", detail and (": " .. tostring(detail)) or ""), 2)
    end
    pause(POLL_MS)
  end
end

-- ---- ports ---------------------------------------------------------------

local function htons(port) return bit.bor(bit.lshift(bit.band(port, 0xff), 8), bit.rshift(port, 8)) end

local function sockaddr(port)
  local sa = ffi.new("ls_sockaddr_in")
  sa.family = AF_INET
  sa.port = htons(port)
  sa.addr = 0x0100007f -- 127.0.0.1
  return sa
end

-- Can a listener bind 127.0.0.1:port (the way redis does, with SO_REUSEADDR)?
local function port_bindable(port)
  local fd = C.socket(AF_INET, SOCK_STREAM, 0)
  if fd < 0 then return false end
  local one = ffi.new("int[1]", 1)
  C.setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, one, 4)
  local sa = sockaddr(port)
  local ok = C.bind(fd, sa, ffi.sizeof(sa)) == 0
  C.close(fd)
  return ok
end

--- Is something accepting connections on 127.0.0.1:port?
function helper.port_open(port)
  local fd = C.socket(AF_INET, SOCK_STREAM, 0)
  if fd < 0 then return false end
  local sa = sockaddr(port)
  local ok = C.connect(fd, sa, ffi.sizeof(sa)) == 0
  C.close(fd)
  return ok
end

local handed_out = {}
local rng = (math.floor(helper.now() * 1e6) + C.getpid() * 7919) % 2147483647

--[[ A loopback port nobody listens on. It is picked below the kernel's
ephemeral range, so no outgoing connection (the host's own client sockets) can
be given it, and a port left without a server stays free: a connection to it
can never meet itself. Callers still retry if a server fails to bind it. ]]
function helper.free_port()
  local lo = 32768
  local f = io.open("/proc/sys/net/ipv4/ip_local_port_range")
  if f then
    lo = tonumber(f:read("*n")) or lo
    f:close()
  end
  local first, last = 10000, lo - 1
  if last - first < 1000 then first, last = 1024, math.max(1100, lo - 1) end
  for _ = 1, 1000 do
    rng = (rng * 48271) % 2147483647
    local port = first + rng % (last - first + 1)
    if not handed_out[port] and port_bindable(port) then
      handed_out[port] = true
      return port
    end
  end
  error("no free loopback port found", 2)
end

-- ---- redis-server --------------------------------------------------------

local Server = {}
Server.__index = Server

local function redis_url(port, password)
  if password then return string.format("redis://:%s@127.0.0.1:%d", password, port) end
  return string.format("redis://127.0.0.1:%d", port)
end

function Server:_cli_argv(extra)
  local argv = { "redis-cli", "-h", "127.0.0.1", "-p", tostring(self.port) }
  if self.password then
    argv[#argv + 1] = "--no-auth-warning"
    argv[#argv + 1] = "-a"
    argv[#argv + 1] = self.password
  end
  for _, a in ipairs(extra) do argv[#argv + 1] = tostring(a) end
  return argv
end

-- Starts redis-server on self.port; returns true or nil, reason.
function Server:_launch()
  local o = self.opts
  local argv = {
    "redis-server",
    "--port", tostring(self.port), "--bind", "127.0.0.1",
    "--dir", self.dir, "--logfile", self.dir .. "/redis.log",
    "--daemonize", "no", "--save", o.save or "",
    "--appendonly", o.appendonly and "yes" or "no",
  }
  if o.requirepass then
    argv[#argv + 1] = "--requirepass"
    argv[#argv + 1] = o.requirepass
  end
  for _, a in ipairs(o.args or {}) do argv[#argv + 1] = a end
  local before = file_exists(self.dir .. "/redis.log") and #helper.read_file(self.dir .. "/redis.log") or 0
  self.proc = helper.spawn(argv, { pdeathsig = true, stdout = self.dir .. "/redis.stdout", stderr = "stdout" })
  local deadline = helper.now() + 15
  while helper.now() < deadline do
    if not self.proc:alive() then
      local log = file_exists(self.dir .. "/redis.log") and helper.read_file(self.dir .. "/redis.log"):sub(before + 1) or ""
      log = log .. helper.read_file(self.dir .. "/redis.stdout")
      return nil, "redis-server exited (code " .. tostring(self.proc.code) .. "):\n" .. tail(log, 15)
    end
    if helper.port_open(self.port) then
      local code, out = helper.run(self:_cli_argv { "PING" }, { timeout = 10 })
      if code == 0 and helper.trim(out) == "PONG" then return true end
    end
    pause(POLL_MS)
  end
  self.proc:kill("KILL")
  self.proc:wait(5)
  return nil, "redis-server did not answer PING within 15 s"
end

--[[ Starts a private redis-server on a free loopback port in a temp folder and
waits until it answers PING. opts: appendonly (bool, default false), save
(string, default "" = no snapshots), requirepass (string), port (a fixed
port, e.g. one a host is already trying), dir, args (extra server options).
Returns a server: srv.port, srv.url (password included when set),
srv.url_redacted, srv.dir. ]]
function helper.redis_start(opts)
  opts = opts or {}
  local dir = opts.dir or helper.tmpdir("redis")
  local last_err
  for _ = 1, 8 do
    local port = opts.port or helper.free_port()
    local srv = setmetatable({
      port = port, dir = dir, opts = opts, password = opts.requirepass,
      url = redis_url(port, opts.requirepass),
      url_redacted = redis_url(port, opts.requirepass and "***"),
    }, Server)
    local ok, err = srv:_launch()
    if ok then
      live.servers[#live.servers + 1] = srv
      return srv
    end
    last_err = err
    if opts.port or not err:find("in use", 1, true) then break end
  end
  error("cannot start redis-server: " .. tostring(last_err), 2)
end

function Server:alive() return self.proc ~= nil and self.proc:alive() end

--- Graceful stop (SIGTERM: the server flushes its AOF), KILL after 10 s.
function Server:stop()
  if self.proc then self.proc:terminate(10) end
end

--- SIGKILL: a crash; nothing is flushed beyond what was written.
function Server:kill()
  if self.proc and self.proc:alive() then
    self.proc:kill("KILL")
    self.proc:wait(10)
  end
end

--- Starts the server again on the same port and folder (and options).
function Server:restart()
  if self:alive() then self:stop() end
  local err
  for _ = 1, 20 do
    local ok
    ok, err = self:_launch()
    if ok then return self end
    if not err:find("in use", 1, true) then break end
    pause(100)
  end
  error("cannot restart redis-server on port " .. self.port .. ": " .. tostring(err), 2)
end

--- redis-cli's raw output for one command, trimmed. Errors if redis-cli fails.
function Server:cli(...)
  local code, out, err = helper.run(self:_cli_argv { ... }, { timeout = 30 })
  if code ~= 0 then
    error(string.format("redis-cli %s failed (%d): %s%s", table.concat({ ... }, " "), code, out, err), 2)
  end
  return helper.trim(out)
end

local function denull(v)
  if v == cjson.null then return nil end
  if type(v) == "table" then
    for k, x in pairs(v) do v[k] = denull(x) end
  end
  return v
end

--- One command's reply as a Lua value (redis-cli --json, RESP3); nil, message on a Redis error.
function Server:call(...)
  local code, out, err = helper.run(self:_cli_argv { "--json", ... }, { timeout = 30 })
  if code ~= 0 then
    error(string.format("redis-cli %s failed (%d): %s%s", table.concat({ ... }, " "), code, out, err), 2)
  end
  out = helper.trim(out)
  if out:find("^error:") then
    local ok, msg = pcall(cjson.decode, out:sub(7))
    return nil, ok and msg or out:sub(7)
  end
  local ok, v = pcall(cjson.decode, out)
  if not ok then error("cannot decode redis-cli --json output: " .. out, 2) end
  return denull(v)
end

local function resp(cmd)
  local parts = { "*" .. #cmd .. "\r\n" }
  for _, a in ipairs(cmd) do
    a = tostring(a)
    parts[#parts + 1] = "$" .. #a .. "\r\n" .. a .. "\r\n"
  end
  return table.concat(parts)
end

--- Sends many commands (a list of argv lists) through one `redis-cli --pipe`;
--- errors unless every one succeeded. Returns the number of replies.
function Server:pipe(commands)
  local buf = {}
  for i, cmd in ipairs(commands) do buf[i] = resp(cmd) end
  local code, out, err = helper.run(self:_cli_argv { "--pipe" }, { stdin = table.concat(buf), timeout = 60 })
  local errors, replies = out:match("errors: (%d+), replies: (%d+)")
  if code ~= 0 or errors ~= "0" or tonumber(replies) ~= #commands then
    error("redis-cli --pipe failed: " .. out .. err, 2)
  end
  return tonumber(replies)
end

function Server:xlen(stream) return assert(self:call("XLEN", stream)) end

--- Entries of a stream as {id = "ms-seq", fields = {name = value}, pairs = {n1, v1, ...}}.
function Server:xrange(stream, first, last)
  local out = {}
  for _, e in ipairs(assert(self:call("XRANGE", stream, first or "-", last or "+"))) do
    local fields = {}
    for i = 1, #e[2], 2 do fields[e[2][i]] = e[2][i + 1] end
    out[#out + 1] = { id = e[1], fields = fields, pairs = e[2] }
  end
  return out
end

--- The ids pending in a group, in order, as a list and as a set.
function Server:pending_ids(stream, group)
  local list, set = {}, {}
  for _, p in ipairs(assert(self:call("XPENDING", stream, group, "-", "+", "100000"))) do
    list[#list + 1] = p[1]
    set[p[1]] = p
  end
  return list, set
end

--- A group's XINFO GROUPS record (name, consumers, pending, last-delivered-id, ...), or nil.
function Server:group(stream, name)
  local groups = self:call("XINFO", "GROUPS", stream)
  for _, g in ipairs(groups or {}) do
    if g.name == name then return g end
  end
  return nil
end

--- Names of a group's consumers (XINFO CONSUMERS), as a set.
function Server:consumers(stream, group)
  local set = {}
  for _, c in ipairs(assert(self:call("XINFO", "CONSUMERS", stream, group))) do set[c.name] = c end
  return set
end

--- How many clients sit blocked in the given command (CLIENT LIST flags=b).
function Server:blocked_clients(cmd)
  local n = 0
  for line in self:cli("CLIENT", "LIST"):gmatch("[^\n]+") do
    local flags = line:match(" flags=(%S+)")
    if flags and flags:find("b", 1, true) and line:find(" cmd=" .. cmd:lower() .. " ", 1, true) then
      n = n + 1
    end
  end
  return n
end

local Monitor = {}
Monitor.__index = Monitor

--- Starts `redis-cli MONITOR` into a file; returns once it is attached.
function Server:monitor()
  local m = setmetatable({ path = helper.tmpdir("monitor") .. "/monitor.log" }, Monitor)
  m.proc = helper.spawn(self:_cli_argv { "MONITOR" }, { stdout = m.path, stderr = "stdout", pdeathsig = true })
  live.procs[#live.procs + 1] = m.proc
  helper.wait_until(function()
    return file_exists(m.path) and helper.read_file(m.path):find("^OK") ~= nil
  end, 10, "redis-cli MONITOR to attach")
  return m
end

-- Parses `"A" "b c" "\"x\""` (sdscatrepr quoting) into a list of strings.
local function monitor_args(s)
  local args, i = {}, 1
  while true do
    local q = s:find('"', i, true)
    if not q then break end
    local buf, j = {}, q + 1
    while j <= #s do
      local c = s:sub(j, j)
      if c == "\\" then
        local nx = s:sub(j + 1, j + 1)
        if nx == "x" then
          buf[#buf + 1] = string.char(tonumber(s:sub(j + 2, j + 3), 16))
          j = j + 4
        else
          buf[#buf + 1] = ({ n = "\n", r = "\r", t = "\t", a = "\a", b = "\b" })[nx] or nx
          j = j + 2
        end
      elseif c == '"' then
        break
      else
        buf[#buf + 1] = c
        j = j + 1
      end
    end
    args[#args + 1] = table.concat(buf)
    i = j + 1
  end
  return args
end

--- The commands seen so far: {client = "ip:port", args = {"XADD", ...}, line = raw}.
function Monitor:commands()
  local out = {}
  for line in helper.read_file(self.path):gmatch("[^\n]+") do
    local client, rest = line:match("^%d+%.%d+ %[%d+ ([^%]]+)%] (.*)$")
    if client then out[#out + 1] = { client = client, args = monitor_args(rest), line = line } end
  end
  return out
end

function Monitor:stop() self.proc:terminate(5) end

-- ---- logfmt --------------------------------------------------------------

local UNESCAPE = { n = "\n", t = "\t", r = "\r", ['"'] = '"', ["\\"] = "\\" }

--- Parses one logfmt line into {key = value}; quoted values are unescaped.
function helper.parse_logfmt(line)
  local rec, i, n = {}, 1, #line
  while i <= n do
    local s = line:find("[^ ]", i)
    if not s then break end
    local stop = line:find("[= ]", s) or n + 1
    local key = line:sub(s, stop - 1)
    if line:sub(stop, stop) ~= "=" then
      rec[key] = true
      i = stop
    elseif line:sub(stop + 1, stop + 1) == '"' then
      local buf, j = {}, stop + 2
      while j <= n do
        local k = line:find('[\\"]', j)
        if not k then
          buf[#buf + 1] = line:sub(j)
          j = n + 1
          break
        end
        buf[#buf + 1] = line:sub(j, k - 1)
        if line:sub(k, k) == '"' then
          j = k
          break
        end
        local e = line:sub(k + 1, k + 1)
        buf[#buf + 1] = UNESCAPE[e] or e
        j = k + 2
      end
      rec[key] = table.concat(buf)
      i = j + 1
    else
      local e = line:find(" ", stop + 1) or n + 1
      rec[key] = line:sub(stop + 1, e - 1)
      i = e
    end
  end
  return rec
end

--[[ Seconds (with fraction) from a log `time=` value, for differences only:
RFC 3339 / ISO 8601 (2024-05-01T12:00:00.123Z, +02:00, a space for T) or
epoch seconds. nil when the format is not recognised. ]]
function helper.parse_time(s)
  if not s then return nil end
  if s:match("^%d+%.?%d*$") then return tonumber(s) end
  local y, mo, d, h, mi, sec, frac = s:match("^(%d%d%d%d)-(%d%d)-(%d%d)[T ](%d%d):(%d%d):(%d%d)([.,]?%d*)")
  if not y then return nil end
  -- days from civil (proleptic Gregorian), so no time zone or DST is involved
  y, mo, d = tonumber(y), tonumber(mo), tonumber(d)
  if mo <= 2 then y = y - 1 end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local mp = (mo + 9) % 12
  local doy = math.floor((153 * mp + 2) / 5) + d - 1
  local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
  local days = era * 146097 + doe
  local t = days * 86400 + tonumber(h) * 3600 + tonumber(mi) * 60 + tonumber(sec)
  if #frac > 1 then t = t + tonumber("0." .. frac:sub(2)) end
  return t
end

-- ---- stream ids ----------------------------------------------------------

--- Compares two stream ids "ms-seq": -1, 0 or 1.
function helper.id_cmp(a, b)
  local am, as = a:match("^(%d+)-(%d+)$")
  local bm, bs = b:match("^(%d+)-(%d+)$")
  am, as, bm, bs = tonumber(am), tonumber(as), tonumber(bm), tonumber(bs)
  if am ~= bm then return am < bm and -1 or 1 end
  if as ~= bs then return as < bs and -1 or 1 end
  return 0
end

-- ---- payments ------------------------------------------------------------

--- A payment body as the examples expect it.
function helper.payment(id, account, amount_cents)
  return string.format('{"id":%d,"account":"%s","amount_cents":%d}', id, account, amount_cents or 500)
end

--- The account of payment `id` when payments go round-robin over `accounts`:
--- a count (acct-1, acct-2, ...) or a list of names.
function helper.account_of(id, accounts)
  if type(accounts) == "table" then return accounts[(id - 1) % #accounts + 1] end
  return "acct-" .. ((id - 1) % accounts + 1)
end

--- XADD commands for payments first..last round-robin over `accounts` (see
--- account_of), keyed by account; for Server:pipe.
function helper.payment_commands(first, last, accounts, stream)
  local cmds = {}
  for id = first, last do
    local account = helper.account_of(id, accounts)
    cmds[#cmds + 1] = { "XADD", stream or "payments", "*", "data", helper.payment(id, account, 100 + id), "partition-key", account }
  end
  return cmds
end

-- ---- the luastream binary ------------------------------------------------

--- The binary under test: $LUASTREAM_BIN or build/luastream, as an absolute path.
function helper.bin()
  local bin = os.getenv("LUASTREAM_BIN") or "build/luastream"
  if bin:sub(1, 1) ~= "/" then
    local p = io.popen("pwd")
    bin = helper.trim(p:read("*a")) .. "/" .. bin
    p:close()
  end
  if not file_exists(bin) then
    error("luastream binary not found at " .. bin .. ": build it (./dev build) or set LUASTREAM_BIN", 2)
  end
  return bin
end

--- Runs `luastream ARGS...` to its end: exit code, stdout, stderr. The last
--- argument may be an options table for helper.run (env, stdin, timeout).
function helper.luastream(...)
  local args = { ... }
  local opts
  if type(args[#args]) == "table" then opts = table.remove(args) end
  table.insert(args, 1, helper.bin())
  return helper.run(args, opts)
end

--- `luastream publish --redis URL STREAM JSON [--key K] [--header N=V]...`;
--- returns the new entry id (errors when publish fails).
function helper.publish(server_or_url, stream, json, opts)
  opts = opts or {}
  local url = type(server_or_url) == "table" and server_or_url.url or server_or_url
  local args = { "publish", "--redis", url, stream, json }
  if opts.key then
    args[#args + 1] = "--key"
    args[#args + 1] = opts.key
  end
  for _, h in ipairs(opts.headers or {}) do
    args[#args + 1] = "--header"
    args[#args + 1] = h
  end
  local code, out, err = helper.luastream(unpack(args))
  if code ~= 0 then error("luastream publish failed (" .. code .. "): " .. out .. err, 2) end
  return helper.trim(out)
end

-- ---- hosts ---------------------------------------------------------------

local SANITIZER_PATTERNS = { "ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:" }

local Host = {}
Host.__index = Host

--[[ Starts `luastream run --redis URL [--log-level L] ARGS... DIR` in the
background with stdout and stderr in a log file. args: extra arguments (a list,
e.g. {"--consumer", "host-a"}). opts: dir (the handlers folder, required),
server (a server from redis_start) or url (a URL string; false for no --redis),
log_level, env (overrides; REDIS_URL is removed unless given), bin. ]]
function helper.host_start(args, opts)
  opts = opts or {}
  assert(opts.dir, "host_start: opts.dir (the handlers folder) is required")
  local bin = opts.bin or helper.bin()
  local argv = { bin, "run" }
  local url = opts.url
  if url == nil and opts.server then url = opts.server.url end
  if url then
    argv[#argv + 1] = "--redis"
    argv[#argv + 1] = url
  end
  if opts.log_level then
    argv[#argv + 1] = "--log-level"
    argv[#argv + 1] = opts.log_level
  end
  for _, a in ipairs(args or {}) do argv[#argv + 1] = a end
  argv[#argv + 1] = opts.dir
  local env = { REDIS_URL = false }
  for k, v in pairs(opts.env or {}) do env[k] = v end
  local path = helper.tmpdir("host") .. "/host.log"
  local h = setmetatable({ path = path, argv = argv, buf = "", lines_ = {}, recs = {}, scanned = false }, Host)
  h.proc = helper.spawn(argv, { stdout = path, stderr = "stdout", env = env, pdeathsig = true })
  h.pid = h.proc.pid
  live.hosts[#live.hosts + 1] = h
  return h
end

-- Reads what the host wrote since the last call; complete lines become records.
function Host:refresh()
  local f = io.open(self.path, "rb")
  if not f then return end
  f:seek("set", #self.buf)
  local more = f:read("*a")
  f:close()
  if more and #more > 0 then
    self.buf = self.buf .. more
    -- parse complete lines only; a partial last line waits for its newline
    local pos = self.parsed or 0
    while true do
      local nl = self.buf:find("\n", pos + 1, true)
      if not nl then break end
      local line = self.buf:sub(pos + 1, nl - 1)
      self.lines_[#self.lines_ + 1] = line
      local rec = helper.parse_logfmt(line)
      rec._line, rec._pos = line, nl
      self.recs[#self.recs + 1] = rec
      pos = nl
    end
    self.parsed = pos
  end
end

--- Everything the host has written so far.
function Host:log()
  self:refresh()
  return self.buf
end

--- A position in the log: records written later have _pos > mark.
function Host:mark()
  self:refresh()
  return #self.buf
end

--- The log lines containing pattern (a Lua pattern; plain = true for plain text).
function Host:lines(pattern, plain)
  self:refresh()
  local out = {}
  for _, line in ipairs(self.lines_) do
    if not pattern or line:find(pattern, 1, plain) then out[#out + 1] = line end
  end
  return out
end

local function matches(rec, filter)
  if type(filter) == "function" then return filter(rec) end
  for k, v in pairs(filter or {}) do
    if rec[k] ~= tostring(v) then return false end
  end
  return true
end

--- Parsed log records matching filter ({field = value, ...} or a function(rec)).
function Host:records(filter)
  self:refresh()
  local out = {}
  for _, rec in ipairs(self.recs) do
    if matches(rec, filter) then out[#out + 1] = rec end
  end
  return out
end

function Host:count(filter) return #self:records(filter) end

function Host:alive() return self.proc:alive() end

function Host:_describe(n)
  return string.format("host log (%s), last lines:\n%s", self.path, tail(self:log(), n or 30))
end

-- Errors at once when the host has exited (it cannot write what we wait for).
function Host:_check_running(what)
  if not self.proc:alive() then
    self:_scan()
    error(string.format("host exited (code %s) while waiting for %s\n%s",
      tostring(self.proc.code), what, self:_describe()), 3)
  end
end

--[[ Waits until a log line contains pattern (Lua pattern; opts.plain for plain
text; opts.after = a mark: only lines written after it count). Returns the
line. Errors on timeout or if the host exits first. ]]
function Host:wait_log(pattern, timeout_s, opts)
  opts = opts or {}
  local deadline = helper.now() + (timeout_s or 10)
  while true do
    self:refresh()
    for _, rec in ipairs(self.recs) do
      if (not opts.after or rec._pos > opts.after) and rec._line:find(pattern, 1, opts.plain) then
        return rec._line, rec
      end
    end
    self:_check_running("log line " .. pattern)
    if helper.now() >= deadline then
      error(string.format("timed out after %ss waiting for log line %q\n%s", timeout_s or 10, pattern, self:_describe()), 2)
    end
    pause(POLL_MS)
  end
end

--- Waits until at least n records match filter; returns them all.
function Host:wait_records(filter, n, timeout_s, what)
  local deadline = helper.now() + (timeout_s or 10)
  what = what or string.format("%d log records", n)
  while true do
    local recs = self:records(filter)
    if #recs >= n then return recs end
    self:_check_running(what)
    if helper.now() >= deadline then
      error(string.format("timed out after %ss waiting for %s (have %d)\n%s",
        timeout_s or 10, what, #recs, self:_describe()), 2)
    end
    pause(POLL_MS)
  end
end

--- Sends a signal by name ("TERM", "INT", "KILL", ...).
function Host:signal(name)
  assert(SIGNALS[name], "unknown signal " .. tostring(name))
  self.proc:kill(name)
end

-- Fails loudly when the host's output holds a sanitizer report.
function Host:_scan()
  if self.scanned then return end
  self.scanned = true
  self:refresh()
  local lines = {}
  for i, line in ipairs(self.lines_) do lines[i] = line end
  local rest = self.buf:sub((self.parsed or 0) + 1) -- a last line without its newline
  if #rest > 0 then lines[#lines + 1] = rest end
  for i, line in ipairs(lines) do
    -- logfmt records are the host's own lines (a handler may log any text)
    if not line:find("^time=") then
      for _, p in ipairs(SANITIZER_PATTERNS) do
        if line:find(p, 1, true) then
          local excerpt = table.concat(lines, "\n", i, math.min(#lines, i + 60))
          error(string.format("sanitizer report in the host's output (%s):\n%s", self.path, excerpt), 0)
        end
      end
    end
  end
end

--- Waits for the host to exit; returns its exit code (128 + signal when killed
--- by a signal). Errors on timeout, and on a sanitizer report in its output.
function Host:wait_exit(timeout_s)
  local code, sig = self.proc:wait(timeout_s or 15)
  if not code then
    error(string.format("host did not exit within %ss\n%s", timeout_s or 15, self:_describe()), 2)
  end
  self:_scan()
  return code, sig
end

--- SIGTERM, wait (KILL after timeout_s, then error); returns the exit code.
function Host:stop(timeout_s)
  if self.proc:alive() then
    self.proc:kill("TERM")
    local code = self.proc:wait(timeout_s or 15)
    if not code then
      self.proc:kill("KILL")
      self.proc:wait(5)
      error(string.format("host did not stop within %ss of SIGTERM (killed)\n%s", timeout_s or 15, self:_describe()), 2)
    end
  end
  self:_scan()
  return self.proc.code, self.proc.signal
end

--- Fails when secret (a password) appears in any of the texts given.
function helper.assert_no_secret(secret, ...)
  for _, text in ipairs { ... } do
    assert(not text:find(secret, 1, true), "the password appears in output:\n" .. text)
  end
end

-- ---- HTTP (the host's --http endpoint) -----------------------------------

--[[ Sends raw (a whole request) to port on 127.0.0.1 (opts.family "4", the
default) or ::1 ("6") and reads until the server closes or opts.timeout_s
(default 5) passes. Returns status (number), body, the response text; nil, why
when nothing could be read. ]]
function helper.http(port, raw, opts)
  opts = opts or {}
  local six = opts.family == "6"
  local fd = C.socket(six and AF_INET6 or AF_INET, SOCK_STREAM, 0)
  assert(fd >= 0, "socket failed")
  local sa
  if six then
    sa = ffi.new("ls_sockaddr_in6")
    sa.family, sa.port = AF_INET6, htons(port)
    sa.addr[15] = 1 -- ::1
  else
    sa = sockaddr(port)
  end
  if C.connect(fd, sa, ffi.sizeof(sa)) ~= 0 then
    C.close(fd)
    return nil, "connect failed"
  end
  C.write(fd, raw, #raw)
  local chunks, buf = {}, ffi.new("char[4096]")
  local pfd = ffi.new("ls_pollfd[1]")
  pfd[0].fd, pfd[0].events = fd, POLLIN
  local deadline = helper.now() + (opts.timeout_s or 5)
  while helper.now() < deadline do
    if C.poll(pfd, 1, 50) > 0 then
      local n = tonumber(C.read(fd, buf, 4096))
      if n <= 0 then break end
      chunks[#chunks + 1] = ffi.string(buf, n)
    end
  end
  C.close(fd)
  local text = table.concat(chunks)
  local status = tonumber(text:match("^HTTP/1%.1 (%d%d%d) "))
  if not status then return nil, "no HTTP response: " .. text end
  return status, text:match("\r\n\r\n(.*)$"), text
end

--- GET (or opts.method) path: status, body, text (see helper.http).
function helper.http_get(port, path, opts)
  local method = opts and opts.method or "GET"
  return helper.http(port, method .. " " .. path .. " HTTP/1.1\r\nHost: localhost\r\nUser-Agent: spec\r\n\r\n", opts)
end

--- The port (and address) a host logged for --http ADDR:0.
function helper.health_port(host)
  local rec = host:wait_records({ msg = "health endpoint listening" }, 1, 20, "the health endpoint")[1]
  return tonumber(rec.port), rec.addr
end

-- ---- cleanup -------------------------------------------------------------

--[[ Stops every host, MONITOR and server started since the last cleanup and
removes the temp folders (kept with LUASTREAM_KEEP_TMP=1). Call it from
after_each. Errors after cleaning up everything if a host left a sanitizer
report or would not stop. ]]
function helper.cleanup()
  local errors = {}
  for _, h in ipairs(live.hosts) do
    local ok, err = pcall(function()
      if h.proc:alive() then
        h.proc:kill("TERM")
        if not h.proc:wait(10) then
          h.proc:kill("KILL")
          h.proc:wait(5)
        end
      end
      h:_scan()
    end)
    if not ok then errors[#errors + 1] = tostring(err) end
  end
  for _, p in ipairs(live.procs) do pcall(Proc.terminate, p, 5) end
  for _, s in ipairs(live.servers) do pcall(Server.stop, s) end
  if os.getenv("LUASTREAM_KEEP_TMP") ~= "1" then
    for _, d in ipairs(live.dirs) do
      os.execute("rm -rf " .. shell_quote(d))
    end
  end
  live = { hosts = {}, servers = {}, procs = {}, dirs = {} }
  if #errors > 0 then error(table.concat(errors, "\n\n"), 0) end
end

-- Exposed for the helper's own spec.
helper._monitor_args = monitor_args

return helper
