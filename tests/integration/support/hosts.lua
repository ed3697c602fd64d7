-- hosts: the luastream binary under test: one-shot commands (publish, ...)
-- and hosts running in the background, their logs parsed as records, waits on
-- them, signals, and the sanitizer scan of their output.
local sys = require "tests.integration.support.sys"
local files = require "tests.integration.support.files"
local processes = require "tests.integration.support.processes"
local logfmt = require "tests.integration.support.logfmt"
local registry = require "tests.integration.support.registry"

local hosts = {}

--- The binary under test: $LUASTREAM_BIN or build/luastream, as an absolute path.
function hosts.bin()
  local bin = os.getenv("LUASTREAM_BIN") or "build/luastream"
  if bin:sub(1, 1) ~= "/" then
    local p = io.popen("pwd")
    bin = files.trim(p:read("*a")) .. "/" .. bin
    p:close()
  end
  if not files.file_exists(bin) then
    error("luastream binary not found at " .. bin .. ": build it (./dev build) or set LUASTREAM_BIN", 2)
  end
  return bin
end

--- Runs `luastream ARGS...` to its end: exit code, stdout, stderr. An
--- argument may be a list of arguments (spliced in, e.g. a set of --tls-*
--- options); the last may be an options table for processes.run (env,
--- stdin, timeout), a table without a list part.
function hosts.luastream(...)
  local args = { hosts.bin() }
  local all = { ... }
  local opts
  if type(all[#all]) == "table" and #all[#all] == 0 then opts = table.remove(all) end
  for _, a in ipairs(all) do
    if type(a) == "table" then
      for _, x in ipairs(a) do args[#args + 1] = x end
    else
      args[#args + 1] = a
    end
  end
  return processes.run(args, opts)
end

--- `luastream publish --redis URL STREAM JSON [--key K] [--header N=V]...`;
--- returns the new entry id (errors when publish fails).
function hosts.publish(server_or_url, stream, json, opts)
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
  local code, out, err = hosts.luastream(unpack(args))
  if code ~= 0 then error("luastream publish failed (" .. code .. "): " .. out .. err, 2) end
  return files.trim(out)
end

-- ---- hosts ---------------------------------------------------------------

local SANITIZER_PATTERNS = {
  "ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
  "WARNING: ThreadSanitizer", -- ./dev tsan: a data race (or another TSan report)
}

local Host = {}
Host.__index = Host
hosts.Host = Host

--[[ Starts `luastream run --redis URL [--log-level L] ARGS... DIR` in the
background with stdout and stderr in a log file. args: extra arguments (a list,
e.g. {"--consumer", "host-a"}). opts: dir (the handlers folder, required),
server (a server from redis_start) or url (a URL string; false for no --redis),
log_level, env (overrides; REDIS_URL is removed unless given), bin, wrap (a
command list put before the binary, which execs it or runs it as a child, e.g.
{"timeout", "60"} or {"prlimit", "--nofile=1024", "--"}: h:signal then signals
the wrapper), command (the subcommand, default "run"; e.g. "console", whose
dir may be a list of stream names instead). ]]
function hosts.host_start(args, opts)
  opts = opts or {}
  assert(opts.dir, "host_start: opts.dir (the handlers folder) is required")
  local bin = opts.bin or hosts.bin()
  local argv = {}
  for _, a in ipairs(opts.wrap or {}) do argv[#argv + 1] = a end
  argv[#argv + 1] = bin
  argv[#argv + 1] = opts.command or "run"
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
  for _, d in ipairs(type(opts.dir) == "table" and opts.dir or { opts.dir }) do argv[#argv + 1] = d end
  local env = { REDIS_URL = false }
  for k, v in pairs(opts.env or {}) do env[k] = v end
  local path = files.tmpdir("host") .. "/host.log"
  local h = setmetatable({ path = path, argv = argv, buf = "", lines_ = {}, recs = {}, scanned = false }, Host)
  h.proc = processes.spawn(argv, { stdout = path, stderr = "stdout", env = env, pdeathsig = true })
  h.pid = h.proc.pid
  registry.hosts[#registry.hosts + 1] = h
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
      local rec = logfmt.parse_logfmt(line)
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
  return string.format("host log (%s), last lines:\n%s", self.path, files.tail(self:log(), n or 30))
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
  local deadline = sys.now() + (timeout_s or 10)
  while true do
    self:refresh()
    for _, rec in ipairs(self.recs) do
      if (not opts.after or rec._pos > opts.after) and rec._line:find(pattern, 1, opts.plain) then
        return rec._line, rec
      end
    end
    self:_check_running("log line " .. pattern)
    if sys.now() >= deadline then
      error(string.format("timed out after %ss waiting for log line %q\n%s", timeout_s or 10, pattern, self:_describe()), 2)
    end
    sys.pause(sys.POLL_MS)
  end
end

--- Waits until at least n records match filter; returns them all.
function Host:wait_records(filter, n, timeout_s, what)
  local deadline = sys.now() + (timeout_s or 10)
  what = what or string.format("%d log records", n)
  while true do
    local recs = self:records(filter)
    if #recs >= n then return recs end
    self:_check_running(what)
    if sys.now() >= deadline then
      error(string.format("timed out after %ss waiting for %s (have %d)\n%s",
        timeout_s or 10, what, #recs, self:_describe()), 2)
    end
    sys.pause(sys.POLL_MS)
  end
end

--- Sends a signal by name ("TERM", "INT", "KILL", ...).
function Host:signal(name)
  assert(sys.SIGNALS[name], "unknown signal " .. tostring(name))
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
    -- log records (logfmt or JSON) are the host's own lines (a handler may log any text)
    if not line:find("^time=") and not line:find('^{"time":') then
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
function hosts.assert_no_secret(secret, ...)
  for _, text in ipairs { ... } do
    assert(not text:find(secret, 1, true), "the password appears in output:\n" .. text)
  end
end

return hosts
