-- ports: free loopback ports for private servers, and whether one accepts
-- connections.
local ffi = require "ffi"
local sys = require "tests.integration.support.sys"

local C = sys.C
local ports = {}

-- Can a listener bind 127.0.0.1:port (the way redis does, with sys.SO_REUSEADDR)?
local function port_bindable(port)
  local fd = C.socket(sys.AF_INET, sys.SOCK_STREAM, 0)
  if fd < 0 then return false end
  local one = ffi.new("int[1]", 1)
  C.setsockopt(fd, sys.SOL_SOCKET, sys.SO_REUSEADDR, one, 4)
  local sa = sys.sockaddr(port)
  local ok = C.bind(fd, sa, ffi.sizeof(sa)) == 0
  C.close(fd)
  return ok
end

--- Is something accepting connections on 127.0.0.1:port?
function ports.port_open(port)
  local fd = C.socket(sys.AF_INET, sys.SOCK_STREAM, 0)
  if fd < 0 then return false end
  local sa = sys.sockaddr(port)
  local ok = C.connect(fd, sa, ffi.sizeof(sa)) == 0
  C.close(fd)
  return ok
end

local handed_out = {}
local rng = (math.floor(sys.now() * 1e6) + C.getpid() * 7919) % 2147483647

--[[ A loopback port nobody listens on. It is picked below the kernel's
ephemeral range, so no outgoing connection (the host's own client sockets) can
be given it, and a port left without a server stays free: a connection to it
can never meet itself. Callers still retry if a server fails to bind it. ]]
function ports.free_port()
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

--[[ A server that takes connections and never answers (a hung process, a
half-open middlebox): the kernel completes each handshake, nothing reads.
:connections() accepts what came since the last call, closes it, and says how
many; :close() stops listening. ]]
function ports.silent_server()
  local fd = C.socket(sys.AF_INET, sys.SOCK_STREAM, 0)
  assert(fd >= 0, "socket failed")
  local one = ffi.new("int[1]", 1)
  C.setsockopt(fd, sys.SOL_SOCKET, sys.SO_REUSEADDR, one, 4)
  local port = ports.free_port()
  local sa = sys.sockaddr(port)
  assert(C.bind(fd, sa, ffi.sizeof(sa)) == 0 and C.listen(fd, 64) == 0, "cannot listen on " .. port)
  local s = { port = port }
  function s.connections()
    local n, pfd = 0, ffi.new("ls_pollfd[1]")
    pfd[0].fd, pfd[0].events = fd, sys.POLLIN
    while C.poll(pfd, 1, 0) > 0 do
      local c = C.accept(fd, nil, nil)
      if c < 0 then break end
      C.close(c)
      n = n + 1
    end
    return n
  end
  function s.close() C.close(fd) end
  return s
end

return ports
