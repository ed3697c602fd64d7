-- redis: private redis-servers for the specs (start, stop, crash, restart),
-- redis-cli access to them (raw, decoded from --json, piped) and MONITOR.
local cjson = require "cjson"
local sys = require "tests.integration.support.sys"
local files = require "tests.integration.support.files"
local processes = require "tests.integration.support.processes"
local ports = require "tests.integration.support.ports"
local registry = require "tests.integration.support.registry"

local redis = {}

local Server = {}
Server.__index = Server
redis.Server = Server

local function redis_url(port, password, scheme)
  scheme = scheme or "redis"
  if password then return string.format("%s://:%s@127.0.0.1:%d", scheme, password, port) end
  return string.format("%s://127.0.0.1:%d", scheme, port)
end

--[[ redis-cli's TLS options for a server started with opts.tls (see
redis_start): its CA (cli_ca, else ca), the client certificate, --insecure
when asked. None when the server also has a plaintext port (the cli uses it). ]]
function redis.cli_tls_args(t)
  if not t or t.plain_port then return {} end
  local args = { "--tls", "--cacert", t.cli_ca or t.ca }
  local cert, key = t.client_cert, t.client_key
  if cert then
    args[#args + 1] = "--cert"
    args[#args + 1] = cert
    args[#args + 1] = "--key"
    args[#args + 1] = key
  end
  if t.insecure then args[#args + 1] = "--insecure" end
  return args
end

-- redis-server's options for TLS (opts.tls of redis_start) on tls_port.
local function server_tls_args(t, tls_port)
  local args = {
    "--tls-port", tostring(tls_port),
    "--tls-cert-file", t.cert, "--tls-key-file", t.key, "--tls-ca-cert-file", t.ca,
    "--tls-auth-clients", t.auth_clients or "yes",
    "--tls-replication", t.replication and "yes" or "no",
    "--tls-cluster", t.cluster and "yes" or "no",
  }
  if t.client_cert then
    for _, a in ipairs { "--tls-client-cert-file", t.client_cert, "--tls-client-key-file", t.client_key } do
      args[#args + 1] = a
    end
  end
  return args
end
redis.server_tls_args = server_tls_args

function Server:_cli_argv(extra)
  local argv = { "redis-cli", "-h", "127.0.0.1", "-p", tostring(self.port) }
  for _, a in ipairs(redis.cli_tls_args(self.tls)) do argv[#argv + 1] = a end
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
  local t = self.tls
  local argv = {
    "redis-server",
    "--port", tostring((t and not t.plain_port) and 0 or self.port), "--bind", "127.0.0.1",
    "--dir", self.dir, "--logfile", self.dir .. "/redis.log",
    "--daemonize", "no", "--save", o.save or "",
    "--appendonly", o.appendonly and "yes" or "no",
  }
  if o.requirepass then
    argv[#argv + 1] = "--requirepass"
    argv[#argv + 1] = o.requirepass
  end
  if t then
    for _, a in ipairs(server_tls_args(t, self.tls_port)) do argv[#argv + 1] = a end
  end
  for _, a in ipairs(o.args or {}) do argv[#argv + 1] = a end
  local before = files.file_exists(self.dir .. "/redis.log") and #files.read_file(self.dir .. "/redis.log") or 0
  self.proc = processes.spawn(argv, { pdeathsig = true, stdout = self.dir .. "/redis.stdout", stderr = "stdout" })
  local deadline = sys.now() + 15
  while sys.now() < deadline do
    if not self.proc:alive() then
      local log = files.file_exists(self.dir .. "/redis.log") and files.read_file(self.dir .. "/redis.log"):sub(before + 1) or ""
      log = log .. files.read_file(self.dir .. "/redis.stdout")
      return nil, "redis-server exited (code " .. tostring(self.proc.code) .. "):\n" .. files.tail(log, 15)
    end
    if ports.port_open(self.port) then
      local code, out = processes.run(self:_cli_argv { "PING" }, { timeout = 10 })
      if code == 0 and files.trim(out) == "PONG" then return true end
    end
    sys.pause(sys.POLL_MS)
  end
  self.proc:kill("KILL")
  self.proc:wait(5)
  return nil, "redis-server did not answer PING within 15 s"
end

--[[ Skips the running spec when redis-server is not installed: says why on
stderr and marks the test pending (busted's skip), so it is neither passed nor
failed. With LUASTREAM_REQUIRE_REDIS set (./dev test) a missing server is an
error instead: there every test must run. Outside busted it is an error too. ]]
function redis.require_server()
  if sys.on_path("redis-server") then return end
  local why = "redis-server is not on PATH: this test starts its own server "
    .. "(install it, e.g. apt-get install redis-server)"
  sys.skip_missing(why)
end

--[[ Starts a private redis-server on a free loopback port in a temp folder and
waits until it answers PING. opts: appendonly (bool, default false), save
(string, default "" = no snapshots), requirepass (string), port (a fixed
port, e.g. one a host is already trying), dir, args (extra server options;
a spec that kills the server and needs what it answered passes
{ "--appendfsync", "always" }: with the default everysec, a busy machine may
postpone the AOF write past the SIGKILL), tls (a TLS server, see below).
Returns a server: srv.port, srv.url (password included when set),
srv.url_redacted, srv.dir.

opts.tls = {cert =, key = (the server's certificate), ca = (tls-ca-cert-file:
what it trusts from clients and peers), auth_clients = "yes" (default) | "no"
| "optional", client_cert =, client_key = (what redis-cli, and the server's
own outgoing connections (replication, cluster bus), present), cli_ca = (what
redis-cli trusts, default ca), insecure = true (redis-cli skips verification:
for a certificate meant to be refused), replication = true (tls-replication),
cluster = true (tls-cluster), plain_port = true (a plaintext port too),
tls_port = (a fixed TLS port)}. The TLS port is srv.port and srv.url is
rediss://... ; with plain_port, srv.port and srv.url are the plaintext ones
(redis-cli uses them) and srv.tls_port, srv.tls_url the TLS ones. The table is
kept as srv.tls: change its files and restart() to serve other certificates. ]]
function redis.redis_start(opts)
  opts = opts or {}
  redis.require_server()
  local dir = opts.dir or files.tmpdir("redis")
  local last_err
  for _ = 1, 8 do
    local port = opts.port or ports.free_port()
    local t = opts.tls
    local tls_port = t and (t.plain_port and (t.tls_port or ports.free_port()) or port)
    local scheme = (t and not t.plain_port) and "rediss" or "redis"
    local srv = setmetatable({
      port = port, dir = dir, opts = opts, password = opts.requirepass, tls = t, tls_port = tls_port,
      url = redis_url(port, opts.requirepass, scheme),
      url_redacted = redis_url(port, opts.requirepass and "***", scheme),
      tls_url = tls_port and redis_url(tls_port, opts.requirepass, "rediss"),
    }, Server)
    local ok, err = srv:_launch()
    if ok then
      registry.servers[#registry.servers + 1] = srv
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
    sys.pause(100)
  end
  error("cannot restart redis-server on port " .. self.port .. ": " .. tostring(err), 2)
end

--- redis-cli's raw output for one command, trimmed. Errors if redis-cli fails.
function Server:cli(...)
  local code, out, err = processes.run(self:_cli_argv { ... }, { timeout = 30 })
  if code ~= 0 then
    error(string.format("redis-cli %s failed (%d): %s%s", table.concat({ ... }, " "), code, out, err), 2)
  end
  return files.trim(out)
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
  local code, out, err = processes.run(self:_cli_argv { "--json", ... }, { timeout = 30 })
  if code ~= 0 then
    error(string.format("redis-cli %s failed (%d): %s%s", table.concat({ ... }, " "), code, out, err), 2)
  end
  out = files.trim(out)
  if out:find("^error:") then
    local ok, msg = pcall(cjson.decode, out:sub(7))
    return nil, ok and msg or out:sub(7)
  end
  local ok, v = pcall(cjson.decode, out)
  if not ok then error("cannot decode redis-cli --json output: " .. out, 2) end
  return denull(v)
end

--- One command (a list of arguments) in the Redis protocol, as `redis-cli
--- --pipe` reads it.
function redis.resp(cmd)
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
  for i, cmd in ipairs(commands) do buf[i] = redis.resp(cmd) end
  local code, out, err = processes.run(self:_cli_argv { "--pipe" }, { stdin = table.concat(buf), timeout = 60 })
  local errors, replies = out:match("errors: (%d+), replies: (%d+)")
  if code ~= 0 or errors ~= "0" or tonumber(replies) ~= #commands then
    error("redis-cli --pipe failed: " .. out .. err, 2)
  end
  return tonumber(replies)
end

--- Starts `redis-cli --pipe` sending commands (a list of argv lists) in the
--- background; returns the process (its output in a file beside its input).
function Server:pipe_async(commands)
  local buf = {}
  for i, cmd in ipairs(commands) do buf[i] = redis.resp(cmd) end
  local dir = files.tmpdir("publish")
  files.write_file(dir .. "/in", table.concat(buf))
  return processes.spawn(self:_cli_argv { "--pipe" }, { stdin = dir .. "/in", stdout = dir .. "/out", stderr = "stdout" })
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
redis.Monitor = Monitor

--- Starts `redis-cli MONITOR` into a file; returns once it is attached.
function Server:monitor()
  local m = setmetatable({ path = files.tmpdir("monitor") .. "/monitor.log" }, Monitor)
  m.proc = processes.spawn(self:_cli_argv { "MONITOR" }, { stdout = m.path, stderr = "stdout", pdeathsig = true })
  registry.procs[#registry.procs + 1] = m.proc
  processes.wait_until(function()
    return files.file_exists(m.path) and files.read_file(m.path):find("^OK") ~= nil
  end, 10, "redis-cli MONITOR to attach")
  return m
end

-- Parses `"A" "b c" "\"x\""` (sdscatrepr quoting) into a list of strings.
function redis.monitor_args(s)
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

--- The commands an outcome script ran (MONITOR shows a script's commands as
--- client "lua", right after the EVAL or EVALSHA that ran them) in the call that ran
--- the first command matching pred: the EVAL's client and the list of args;
--- nil and why when that command ran outside a script or was not seen.
function redis.script_block(commands, pred)
  local at
  for i, c in ipairs(commands) do
    if c.client == "lua" and pred(c.args) then
      at = i
      break
    end
  end
  if not at then return nil, "no such command run by a script in MONITOR output" end
  local first = at
  while first > 1 and commands[first - 1].client == "lua" do first = first - 1 end
  local eval = commands[first - 1]
  local name = eval and eval.args[1]:upper()
  if name ~= "EVAL" and name ~= "EVALSHA" then -- the host sends its scripts by SHA
    return nil, "no EVAL or EVALSHA before " .. commands[at].line
  end
  local block = {}
  for i = first, #commands do
    if commands[i].client ~= "lua" then break end
    block[#block + 1] = commands[i].args
  end
  return block, eval.client
end

--- The commands seen so far: {client = "ip:port", args = {"XADD", ...}, line = raw}.
function Monitor:commands()
  local out = {}
  for line in files.read_file(self.path):gmatch("[^\n]+") do
    local client, rest = line:match("^%d+%.%d+ %[%d+ ([^%]]+)%] (.*)$")
    if client then out[#out + 1] = { client = client, args = redis.monitor_args(rest), line = line } end
  end
  return out
end

function Monitor:stop() self.proc:terminate(5) end

return redis
