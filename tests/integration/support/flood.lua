-- flood: holds idle and slow-loris connections open to a port on 127.0.0.1,
-- opening a new one for each the server closes, as someone who wants to hold
-- a health port would. A program of its own (the specs and bench/health_flood
-- run it as a child process, so that its loop never delays their probes):
--
--   luajit tests/integration/support/flood.lua PORT IDLE SLOW [SECONDS]
--
-- IDLE connections send nothing; SLOW ones send a request line and then one
-- byte of a never-ending header every 100 ms. Every connection is
-- non-blocking: one the kernel has not completed yet counts as open, as it
-- holds a place in the server's backlog. Prints "flood open=N closed=M" (N: the
-- connections open, fewer than asked when out of descriptors) once
-- every connection has been opened the first time and then every second (M:
-- connections the server closed so far), and stops after SECONDS (default
-- 600) or when killed.
package.path = "./?.lua;" .. package.path
local bit = require "bit"
local ffi = require "ffi"
local sys = require "tests.integration.support.sys"

pcall(ffi.cdef, "long send(int fd, const void *buf, unsigned long n, int flags);")
local C = sys.C
local SOCK_NONBLOCK, MSG_NOSIGNAL = 2048, 0x4000
local POLLIN, POLLHUP, POLLERR = 1, 16, 8
local SLOW_EVERY_S = 0.1

local port, nidle, nslow, seconds = tonumber(arg[1]), tonumber(arg[2]), tonumber(arg[3]), tonumber(arg[4] or "600")
assert(port and nidle and nslow, "usage: flood.lua PORT IDLE SLOW [SECONDS]")

local sa = sys.sockaddr(port)
local n = nidle + nslow
local pfds = ffi.new("ls_pollfd[?]", n)
local sent = {} -- bytes of the slow request sent on connection i
local SLOW = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " .. string.rep("a", 4000)
local closed = 0

-- A new connection in place i (its request starts again).
local function open(i)
  local fd = C.socket(sys.AF_INET, sys.SOCK_STREAM + SOCK_NONBLOCK, 0)
  if fd < 0 then
    pfds[i].fd = -1 -- out of descriptors here: tried again next turn
    return
  end
  C.connect(fd, sa, ffi.sizeof(sa)) -- EINPROGRESS: completes in the kernel
  pfds[i].fd, pfds[i].events, pfds[i].revents = fd, POLLIN, 0
  sent[i] = 0
end

local opened = 0
for i = 0, n - 1 do
  open(i)
  if pfds[i].fd >= 0 then opened = opened + 1 end
end
io.stdout:write(string.format("flood open=%d closed=0\n", opened))
io.stdout:flush()

local buf = ffi.new("char[512]")
local start = sys.now()
local next_report, next_byte = start + 1, start + SLOW_EVERY_S
while sys.now() - start < seconds do
  C.poll(pfds, n, 20)
  for i = 0, n - 1 do
    local p = pfds[i]
    if p.fd < 0 then
      open(i)
    elseif p.revents ~= 0 then
      -- closed by the server (EOF, reset), or an answer: either way, again
      local got = bit.band(p.revents, POLLIN) ~= 0 and tonumber(C.read(p.fd, buf, 512)) or 0
      if got <= 0 or bit.band(p.revents, POLLHUP + POLLERR) ~= 0 then
        C.close(p.fd)
        closed = closed + 1
        open(i)
      end
    end
  end
  local now = sys.now()
  if now >= next_byte then
    next_byte = now + SLOW_EVERY_S
    for i = nidle, n - 1 do
      local p = pfds[i]
      if p.fd >= 0 and sent[i] < #SLOW then
        -- one byte; a connection still connecting takes none (EAGAIN)
        if C.send(p.fd, SLOW:sub(sent[i] + 1, sent[i] + 1), 1, MSG_NOSIGNAL) == 1 then sent[i] = sent[i] + 1 end
      end
    end
  end
  if now >= next_report then
    next_report = now + 1
    local now_open = 0
    for i = 0, n - 1 do
      if pfds[i].fd >= 0 then now_open = now_open + 1 end
    end
    io.stdout:write(string.format("flood open=%d closed=%d\n", now_open, closed))
    io.stdout:flush()
  end
end
