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

--[[ The ports free_port picks from. They lie below the kernel's ephemeral
range, so no outgoing connection (the host's own client sockets) can be given
one, and a port left without a server stays free: a connection to it can never
meet itself. Only 10000-19999 is handed out, so that a cluster node's bus port
(its port + 10000) falls in 20000-29999, which nothing else takes. Specs run in
parallel (./dev test) each get a slot, LUASTREAM_TEST_SLOT of
LUASTREAM_TEST_SLOTS, and a share of that range of their own: two never race
for a port. ]]
local function port_range()
  local first, last = 10000, 19999
  local slot, slots = tonumber(os.getenv("LUASTREAM_TEST_SLOT")), tonumber(os.getenv("LUASTREAM_TEST_SLOTS"))
  if slot and slots and slots > 1 then
    assert(slot >= 0 and slot < slots, "LUASTREAM_TEST_SLOT must be below LUASTREAM_TEST_SLOTS")
    local width = math.floor((last - first + 1) / slots)
    first = first + slot * width
    last = first + width - 1
  end
  return first, last
end

--- A loopback port nobody listens on, from this process's range (port_range).
--- Callers still retry if a server fails to bind it.
function ports.free_port()
  local first, last = port_range()
  for _ = 1, 1000 do
    rng = (rng * 48271) % 2147483647
    local port = first + rng % (last - first + 1)
    if not handed_out[port] and port_bindable(port) then
      handed_out[port] = true
      return port
    end
  end
  error("no free loopback port found in " .. first .. "-" .. last, 2)
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
