-- processes: starting programs without a shell (posix_spawn), waiting for
-- them with deadlines, signals, and polling a condition until it holds.
local ffi = require "ffi"
local bit = require "bit"
local sys = require "tests.integration.support.sys"
local files = require "tests.integration.support.files"

local C = sys.C
local processes = {}

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
processes.Proc = Proc

--[[ Starts argv (a list; argv[1] is looked up in PATH) without a shell.
opts: stdin = path (default /dev/null); stdout = path; stderr = path or
"stdout" (same file); env = overrides ({NAME = value | false}); pdeathsig =
true to have the child killed when this process dies. Returns a Proc. ]]
function processes.spawn(argv, opts)
  opts = opts or {}
  local args = {}
  if opts.pdeathsig and HAVE_SETPRIV then
    args = { "setpriv", "--pdeathsig", "KILL", "--" }
  end
  for _, a in ipairs(argv) do args[#args + 1] = tostring(a) end
  local env = build_env(opts.env)
  local fa = ffi.new("ls_spawn_actions")
  C.posix_spawn_file_actions_init(fa)
  C.posix_spawn_file_actions_addopen(fa, 0, opts.stdin or "/dev/null", sys.O_RDONLY, 0)
  C.posix_spawn_file_actions_addopen(fa, 1, opts.stdout or "/dev/null", sys.O_WRONLY + sys.O_CREAT + sys.O_TRUNC, 420)
  if opts.stderr == "stdout" then
    C.posix_spawn_file_actions_adddup2(fa, 1, 2)
  elseif opts.stderr then
    C.posix_spawn_file_actions_addopen(fa, 2, opts.stderr, sys.O_WRONLY + sys.O_CREAT + sys.O_TRUNC, 420)
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
  local r = C.waitpid(self.pid, status, sys.WNOHANG)
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
  local deadline = sys.now() + (timeout_s or 10)
  while true do
    local done, code, sig = self:poll()
    if done then return code, sig end
    if sys.now() >= deadline then return nil end
    sys.pause(5)
  end
end

function Proc:kill(sig)
  if self:alive() then C.kill(self.pid, sys.SIGNALS[sig or "TERM"] or sig) end
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
function processes.run(cmd, opts)
  opts = opts or {}
  local argv = type(cmd) == "table" and cmd or { "/bin/sh", "-c", cmd }
  local out, err = os.tmpname(), os.tmpname()
  local inp
  if opts.stdin then
    inp = os.tmpname()
    files.write_file(inp, opts.stdin)
  end
  local env = { REDIS_URL = false }
  for k, v in pairs(opts.env or {}) do env[k] = v end
  local p = processes.spawn(argv, { stdin = inp, stdout = out, stderr = err, env = env })
  local code = p:wait(opts.timeout or 60)
  if not code then
    p:kill("KILL")
    p:wait(5)
  end
  local o, e = files.read_file(out), files.read_file(err)
  os.remove(out)
  os.remove(err)
  if inp then os.remove(inp) end
  if not code then
    error(string.format("command timed out after %ss: %s\nstdout: %s\nstderr: %s",
      opts.timeout or 60, table.concat(argv, " "), files.tail(o, 20), files.tail(e, 20)), 2)
  end
  return code, o, e
end

--- Polls fn every ~20 ms until it returns a true value (returned), or errors
--- naming `what` once timeout_s has passed. fn may return false, detail to
--- have the last detail in the error.
function processes.wait_until(fn, timeout_s, what)
  local deadline = sys.now() + (timeout_s or 10)
  local detail
  while true do
    local v, d = fn()
    if v then return v end
    detail = d
    if sys.now() >= deadline then
      error(string.format("timed out after %ss waiting for %s%s", timeout_s or 10,
        what or "a condition", detail and (": " .. tostring(detail)) or ""), 2)
    end
    sys.pause(sys.POLL_MS)
  end
end

--- A process's state letter from /proc (T once a SIGSTOP took effect), or nil
--- once it is gone.
function processes.proc_state(pid)
  local f = io.open("/proc/" .. pid .. "/stat")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s:match("^%d+ %b() (%a)")
end

return processes
