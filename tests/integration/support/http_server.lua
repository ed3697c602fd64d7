-- http_server: the specs' own HTTP/1.1 server (http_server.py, Python's
-- standard library) on a free loopback port, plain or over TLS with a test
-- CA, and curl access to its control paths (/stats, /requests).
--
-- What the server answers, by path (any method): /echo (200, the request as
-- JSON, recorded), /status/NNN, /never (no answer), /close-mid-body,
-- /big?bytes=N[&chunked=1], /slow?ms=N, /outage?ms=N[&retry_after=V] (503
-- for N ms from its first request, then like /echo), /stats, /requests; see
-- http_server.py.
local cjson = require "cjson"
local sys = require "tests.integration.support.sys"
local files = require "tests.integration.support.files"
local processes = require "tests.integration.support.processes"
local ports = require "tests.integration.support.ports"
local registry = require "tests.integration.support.registry"
local tls = require "tests.integration.support.tls"

local http_server = {}

http_server.SCRIPT = files.repo_root .. "/tests/integration/support/http_server.py"

-- Debian's interpreter when present (not a pyenv or venv one first on PATH).
local function python()
  if sys.C.access("/usr/bin/python3", 1) == 0 then return "/usr/bin/python3" end
  local found = sys.on_path("python3")
  if found then return found end
  error("python3 is not installed: the HTTP tests run their own server with it "
    .. "(install it, e.g. apt-get install python3)", 3)
end

local Server = {}
Server.__index = Server
http_server.Server = Server

-- Starts the script on self.port; true, or nil and why.
function Server:_launch()
  local ready = self.dir .. "/ready"
  os.remove(ready)
  local argv = { python(), http_server.SCRIPT, "--port", self.port, "--ready-file", ready }
  if self.cert_file then
    for _, a in ipairs { "--tls", self.cert_file, self.key_file } do argv[#argv + 1] = a end
  end
  if self.verbose then argv[#argv + 1] = "--verbose" end
  self.proc = processes.spawn(argv, { pdeathsig = true, stdout = self.log_file, stderr = "stdout" })
  local deadline = sys.now() + 15
  while sys.now() < deadline do
    if not self.proc:alive() then
      return nil, string.format("http_server.py exited (code %s):\n%s", tostring(self.proc.code),
        files.tail(files.read_file(self.log_file), 15))
    end
    if files.file_exists(ready) then return true end
    sys.pause(sys.POLL_MS)
  end
  self.proc:kill("KILL")
  self.proc:wait(5)
  return nil, "http_server.py was not ready within 15 s"
end

--[[ Starts the server on a free loopback port (retrying another port if that
one was taken meanwhile) and waits until it listens. opts: tls = true (a test
CA and a certificate for 127.0.0.1 and localhost), port (a fixed port),
verbose = true (one log line per request in srv.log_file).
Returns a server: srv.port, srv.url ("http://127.0.0.1:PORT", or
"https://localhost:PORT" with tls), srv.dir (its temp folder), srv.log_file,
and with tls srv.ca_file, srv.cert_file, srv.key_file. ]]
function http_server.start(opts)
  opts = opts or {}
  local dir = files.tmpdir("http")
  local certs = opts.tls and tls.make_certs(dir) or {}
  local last_err
  for _ = 1, 8 do
    local port = opts.port or ports.free_port()
    local srv = setmetatable({
      port = port, dir = dir, log_file = dir .. "/http_server.log", verbose = opts.verbose,
      url = string.format(opts.tls and "https://localhost:%d" or "http://127.0.0.1:%d", port),
      ca_file = certs.ca_file, cert_file = certs.cert_file, key_file = certs.key_file,
    }, Server)
    local ok, err = srv:_launch()
    if ok then
      registry.procs[#registry.procs + 1] = srv.proc
      return srv
    end
    last_err = err
    if opts.port or not err:find("in use", 1, true) then break end
  end
  error("cannot start the test HTTP server: " .. tostring(last_err), 2)
end

--[[ Runs curl -sS --noproxy '*' ARGS... (a list); returns curl's exit code,
stdout and stderr. ]]
function http_server.curl(args)
  local argv = { "curl", "-sS", "--noproxy", "*" }
  for _, a in ipairs(args) do argv[#argv + 1] = tostring(a) end
  return processes.run(argv, { timeout = 30 })
end

--- http_server.curl with the server's test CA (--cacert) when it has TLS.
function Server:curl(args)
  local argv = {}
  if self.ca_file then argv = { "--cacert", self.ca_file } end
  for _, a in ipairs(args) do argv[#argv + 1] = a end
  return http_server.curl(argv)
end

-- A control path's JSON answer, decoded.
function Server:_control(method, path)
  local code, out, err = self:curl { "--max-time", "10", "-X", method, "--fail", self.url .. path }
  if code ~= 0 then
    error(string.format("%s %s%s failed (curl %d): %s", method, self.url, path, code, err), 3)
  end
  return cjson.decode(out)
end

--[[ The server's counters: {connections = connections that carried a request
other than /stats and /requests, accepted = every TCP connection accepted,
requests = requests other than /stats and /requests, in_flight = those in
progress now, max_concurrent = the most in progress at once, refused = the
503s /outage answered, outage_ms_left = what is left of its outage}. ]]
function Server:stats() return self:_control("GET", "/stats") end

--- The requests /echo saw, in arrival order: {method, path, query, headers =
--- {lower-case name = value}, body}.
function Server:requests() return self:_control("GET", "/requests") end

--- Forgets the recorded /echo requests.
function Server:clear() self:_control("DELETE", "/requests") end

function Server:alive() return self.proc ~= nil and self.proc:alive() end

--[[ SIGTERM (KILL after 5 s) and removes the temp folder (kept with
LUASTREAM_KEEP_TMP=1). Returns the server's exit code: 0 after a clean stop. ]]
function Server:stop()
  local code = self.proc and self.proc:terminate(5)
  if os.getenv("LUASTREAM_KEEP_TMP") ~= "1" and self.dir then
    os.execute("rm -rf " .. files.shell_quote(self.dir))
  end
  return code
end

return http_server
