-- http: raw HTTP requests to the host's --http endpoint.
local ffi = require "ffi"
local sys = require "tests.integration.support.sys"

local C = sys.C
local http = {}

--[[ Sends raw (a whole request) to port on 127.0.0.1 (opts.family "4", the
default) or ::1 ("6") and reads until the server closes or opts.timeout_s
(default 5) passes. Returns status (number), body, the response text; nil, why
when nothing could be read. ]]
function http.http(port, raw, opts)
  opts = opts or {}
  local six = opts.family == "6"
  local fd = C.socket(six and sys.AF_INET6 or sys.AF_INET, sys.SOCK_STREAM, 0)
  assert(fd >= 0, "socket failed")
  local sa
  if six then
    sa = ffi.new("ls_sockaddr_in6")
    sa.family, sa.port = sys.AF_INET6, sys.htons(port)
    sa.addr[15] = 1 -- ::1
  else
    sa = sys.sockaddr(port)
  end
  if C.connect(fd, sa, ffi.sizeof(sa)) ~= 0 then
    C.close(fd)
    return nil, "connect failed"
  end
  C.write(fd, raw, #raw)
  local chunks, buf = {}, ffi.new("char[4096]")
  local pfd = ffi.new("ls_pollfd[1]")
  pfd[0].fd, pfd[0].events = fd, sys.POLLIN
  local deadline = sys.now() + (opts.timeout_s or 5)
  while sys.now() < deadline do
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

--- GET (or opts.method) path: status, body, text (see http.http).
function http.http_get(port, path, opts)
  local method = opts and opts.method or "GET"
  return http.http(port, method .. " " .. path .. " HTTP/1.1\r\nHost: localhost\r\nUser-Agent: spec\r\n\r\n", opts)
end

--[[ One request to 127.0.0.1:port, answered with Connection: close. opts:
method (default GET), path (default /), host (the Host header, default
"127.0.0.1:PORT"; false for none), headers (a list of {name, value}, sent in
order, so a header may come twice), body (a string; Content-Length is added),
timeout_s. Returns a response {status, headers (lower-case name -> value, the
last one), header_list ({name, value} as sent), body, text}, or nil, why. ]]
function http.request(port, opts)
  opts = opts or {}
  local host = opts.host
  if host == nil then host = "127.0.0.1:" .. port end
  local lines = { (opts.method or "GET") .. " " .. (opts.path or "/") .. " HTTP/1.1" }
  if host then lines[#lines + 1] = "Host: " .. host end
  for _, h in ipairs(opts.headers or {}) do lines[#lines + 1] = h[1] .. ": " .. h[2] end
  if opts.body then lines[#lines + 1] = "Content-Length: " .. #opts.body end
  lines[#lines + 1] = "Connection: close"
  local raw = table.concat(lines, "\r\n") .. "\r\n\r\n" .. (opts.body or "")
  local status, _, text = http.http(port, raw, { timeout_s = opts.timeout_s })
  if not status then return nil, text end
  local head, body = text:match("^(.-)\r\n\r\n(.*)$")
  local res = { status = status, headers = {}, header_list = {}, body = body, text = text }
  for line in head:gmatch("[^\r\n]+") do
    local name, value = line:match("^([^:]+):%s*(.-)%s*$")
    if name then
      res.headers[name:lower()] = value
      res.header_list[#res.header_list + 1] = { name:lower(), value }
    end
  end
  return res
end

--[[ GET path on 127.0.0.1:port as a liveness probe does, everything (connect
included) within timeout_s: status, body, the seconds it took; nil, why,
seconds when there was no whole answer by then. ]]
function http.probe(port, path, timeout_s)
  local t0 = sys.now()
  local deadline = t0 + timeout_s
  local fd = C.socket(sys.AF_INET, sys.SOCK_STREAM + 2048, 0) -- SOCK_NONBLOCK
  assert(fd >= 0, "socket failed")
  local sa = sys.sockaddr(port)
  C.connect(fd, sa, ffi.sizeof(sa)) -- EINPROGRESS
  local pfd = ffi.new("ls_pollfd[1]")
  pfd[0].fd, pfd[0].events = fd, 4 -- POLLOUT: connected
  local function wait()
    local left = math.floor((deadline - sys.now()) * 1000)
    return left > 0 and C.poll(pfd, 1, left) > 0
  end
  if not wait() then
    C.close(fd)
    return nil, "not connected", sys.now() - t0
  end
  local req = "GET " .. path .. " HTTP/1.1\r\nHost: localhost\r\nUser-Agent: kube-probe\r\n\r\n"
  C.write(fd, req, #req)
  local chunks, buf = {}, ffi.new("char[4096]")
  pfd[0].events = sys.POLLIN
  while wait() do
    local got = tonumber(C.read(fd, buf, 4096))
    if got <= 0 then break end
    chunks[#chunks + 1] = ffi.string(buf, got)
  end
  C.close(fd)
  local took, text = sys.now() - t0, table.concat(chunks)
  local status = tonumber(text:match("^HTTP/1%.1 (%d%d%d) "))
  if not status or took > timeout_s then return nil, "no answer: " .. text, took end
  return status, text:match("\r\n\r\n(.*)$"), took
end

--- The port (and address) a host logged for --http ADDR:0.
function http.health_port(host)
  local rec = host:wait_records({ msg = "health endpoint listening" }, 1, 20, "the health endpoint")[1]
  return tonumber(rec.port), rec.addr
end

return http
