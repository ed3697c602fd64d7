-- Memory stays bounded on a backlog, whatever the outcome: entries whose
-- outcome (here a reply, written with its ack by one script call) is not written yet count toward
-- what the host holds, so reading waits for writing. Checked from Redis's side
-- (the group's pending entries are exactly what the host holds: a reply and
-- its ack are one transaction) and from the host's peak memory.
local helper = require "tests.integration.helper"

local BATCH = 50

local HANDLER = [[
local ls = require "luastream"
return {
  stream = "payments", group = "screening", start = "beginning",
  batch = ]] .. BATCH .. [[, workers = 8,
  reply_to = "payments.screened",
  handle = function(payment)
    return ls.reply({ payment_id = payment.id, note = string.rep("n", 512) })
  end,
}
]]

local function peak_rss_kb(pid)
  local f = assert(io.open("/proc/" .. pid .. "/status"))
  local text = f:read("*a")
  f:close()
  return tonumber(text:match("VmHWM:%s*(%d+)"))
end

-- Drains a backlog of n payments; returns the most entries the group had
-- pending at once (sampled) and the host's peak RSS in KB.
local function drain(n)
  local srv = helper.redis_start()
  local cmds = helper.payment_commands(1, n, { "acme", "globex", "initech" })
  for _, c in ipairs(cmds) do c[#c + 1] = "pad"; c[#c + 1] = string.rep("p", 1024) end
  srv:pipe(cmds)
  local host = helper.host_start({}, {
    server = srv, dir = helper.handlers_dir({ ["screen.lua"] = HANDLER }),
    -- freed memory is reused at once, as without the sanitizer
    env = { ASAN_OPTIONS = "quarantine_size_mb=0:detect_leaks=1" },
  })
  local most, samples, replied = 0, 0, 0
  helper.wait_until(function()
    local summary = srv:call("XPENDING", "payments", "screening")
    local pending = summary and tonumber(summary[1]) or 0
    replied = srv:xlen("payments.screened")
    if replied > 0 and replied < n then samples = samples + 1 end
    if pending > most then most = pending end
    return replied == n
  end, 120, "every payment screened")
  local rss = peak_rss_kb(host.pid)
  host:stop()
  helper.cleanup()
  return most, samples, rss
end

describe("a backlog drained with replies", function()
  after_each(helper.cleanup)

  it("holds at most 3 x batch entries pending (one batch on lanes, one being written, one read ahead), and peak memory does not grow with the backlog", function()
    local most_small, _, rss_small = drain(2000)
    local most, samples, rss = drain(20000)
    assert.is_true(samples >= 3, "too few samples taken while draining: " .. samples)
    assert.is_true(most <= 3 * BATCH, "up to " .. most .. " entries pending at once")
    assert.is_true(most_small <= 3 * BATCH, "up to " .. most_small .. " entries pending at once")
    -- Ten times the backlog: the same peak, within 8 MB (before, about 1.7 KB
    -- more per entry of backlog).
    assert.is_true(rss - rss_small < 8 * 1024,
      string.format("peak RSS %d KB for 20,000 entries vs %d KB for 2,000", rss, rss_small))
  end)
end)
