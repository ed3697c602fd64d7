-- A reader of stderr that stops reading (a full pipe) must not stop the host:
-- the log is written by a thread of its own from a bounded buffer, lines that
-- do not fit are dropped and counted, and a warning says how many once the
-- reader is back.
local helper = require "tests.integration.helper"
local ffi = require "ffi"

for _, decl in ipairs {
  "int open(const char *path, int flags, ...);",
  "long read(int fd, void *buf, unsigned long n);",
  "int mkfifo(const char *path, unsigned int mode);",
  "int close(int fd);",
} do
  pcall(ffi.cdef, decl)
end
local C = ffi.C
local O_RDONLY, O_NONBLOCK = 0, 2048

-- Logs a 16 KB line per entry: 300 entries are 4.8 MB of log, more than a
-- pipe (64 KB) and the host's buffer (1 MB) together hold.
local HANDLER = [[
local ls = require "luastream"
local filler = string.rep("x", 16384)
return {
  stream = "payments", group = "ledger", workers = 4,
  handle = function(payment)
    ls.log.info("payment posted", { payment_id = payment.id, filler = filler })
  end,
}
]]

-- Everything the pipe holds now, without waiting.
local function drain(fd)
  local chunks, buf = {}, ffi.new("char[65536]")
  while true do
    local n = tonumber(C.read(fd, buf, 65536))
    if n <= 0 then return table.concat(chunks) end
    chunks[#chunks + 1] = ffi.string(buf, n)
  end
end

describe("a stalled log reader", function()
  after_each(helper.cleanup)

  it("does not stop the host: entries are handled, lines dropped are counted and reported", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["post.lua"] = HANDLER })
    local fifo = helper.tmpdir("fifo") .. "/stderr"
    assert.equal(0, C.mkfifo(fifo, 384))
    local fd = C.open(fifo, O_RDONLY + O_NONBLOCK)
    assert.is_true(fd >= 0)
    local proc = helper.spawn({ helper.bin(), "run", "--redis", srv.url, dir },
      { stdout = fifo, stderr = "stdout", env = { REDIS_URL = false }, pdeathsig = true })
    local seen = ""
    helper.wait_until(function()
      seen = seen .. drain(fd)
      return seen:find('msg="host ready"', 1, true) ~= nil
    end, 20, "host ready")

    -- From here on nobody reads the pipe.
    srv:pipe(helper.payment_commands(1, 300, { "acme", "globex" }))
    helper.wait_until(function()
      local g = srv:group("payments", "ledger")
      return g and g["entries-read"] == 300 and g.pending == 0
    end, 30, "every payment handled while the log pipe is full")
    assert.is_true(proc:alive())

    -- The reader comes back and the host stops: what the buffer held arrives,
    -- and with the next line that fits, how many were dropped.
    local got = seen
    proc:kill("TERM")
    local ended, code, signal
    helper.wait_until(function()
      got = got .. drain(fd)
      ended, code, signal = proc:poll()
      return ended
    end, 20, "the host to stop")
    got = got .. drain(fd)
    C.close(fd)
    assert.equal(0, code)
    local dropped = tonumber(got:match('msg="log lines dropped: stderr was not taking them" dropped=(%d+)'))
    local posted = select(2, got:gsub('msg="payment posted"', ""))
    assert(dropped, string.format("exit %s signal %s, no dropped-lines warning in:\n%s", tostring(code),
      tostring(signal), (got:gsub("x+", "x...")):sub(-3000)))
    assert.is_true(posted > 0 and posted < 300)
    assert.is_true(posted + dropped >= 300)
    assert.is_truthy(got:find('msg="host stopped"', 1, true))
  end)
end)
