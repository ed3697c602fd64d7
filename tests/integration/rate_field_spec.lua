-- The handler field rate against a real redis-server: three hosts reading
-- one group with rate = "100/s" and a backlog start 100 entries a second
-- together, in every 10 s window after the first (the burst), within 5 %,
-- and no entry's delivery count rises because of the limit. Each start's
-- time is Redis's own (TIME in the handler's one call), so a loaded machine
-- delays the records, not what they measure.
local helper = require "tests.integration.helper"

local READY = 'msg="host ready"'

local JOBS = [[
local ls = require "luastream"

return {
  stream = "jobs", group = "work", start = "beginning",
  read = "claiming", claim_fallback = true, min_idle = "60s",
  workers = 4, rate = "100/s",
  handle = function(job, ctx)
    ls.redis.call("EVAL", "local t = redis.call('TIME') " ..
      "return redis.call('RPUSH', KEYS[1], string.format('%d %s', t[1] * 1000000 + t[2], ARGV[1]))", 1, "starts",
      ctx.headers[ls.DELIVERY_COUNT_HEADER] or "?")
  end,
}
]]

describe("the rate field on a real server", function()
  after_each(helper.cleanup)

  it("keeps three hosts to 100/s together in every 10 s window for 60 s #slow", function()
    local srv = helper.redis_start()
    assert(srv:call("EVAL", "for i = 1, 8000 do redis.call('XADD', KEYS[1], '*', 'data', '{}') end return 1",
                    "1", "jobs"))
    local dir = helper.handlers_dir({ ["jobs.lua"] = JOBS })
    local hosts = {}
    for i = 0, 2 do
      hosts[#hosts + 1] = helper.host_start({ "--instance", tostring(i) }, { server = srv, dir = dir })
    end
    for _, h in ipairs(hosts) do h:wait_log(READY, 20, { plain = true }) end
    local function server_us()
      local t = srv:call("TIME")
      return tonumber(t[1]) * 1000000 + tonumber(t[2])
    end
    helper.wait_until(function() return tonumber(srv:cli("LLEN", "starts")) > 0 end, 30, "a first start")
    local t0 = tonumber(srv:call("LINDEX", "starts", "0"):match("^(%d+)"))
    helper.wait_until(function() return server_us() > t0 + 61000000 end, 90, "61 s of work")
    local times, counts = {}, {}
    for _, rec in ipairs(srv:call("LRANGE", "starts", "0", "-1")) do
      local t, dc = rec:match("^(%d+) (.*)$")
      times[#times + 1] = tonumber(t)
      counts[dc] = (counts[dc] or 0) + 1
    end
    -- every entry started at its first delivery: waiting for a permit
    -- counted none
    assert.same({ ["0"] = #times }, counts)
    table.sort(times)
    t0 = times[1]
    for k = 1, 5 do
      local from, to, n = t0 + k * 10000000, t0 + (k + 1) * 10000000, 0
      for _, t in ipairs(times) do
        if t >= from and t < to then n = n + 1 end
      end
      assert(n >= 950 and n <= 1050, string.format("%d starts in the window from %d s to %d s", n, k * 10, k * 10 + 10))
    end
    -- the backlog lasted: what is pending was read and not yet finished
    -- (each delivered once), the rest never read
    assert.is_true(tonumber(srv:cli("LLEN", "starts")) < 7000)
    for _, p in ipairs(srv:call("XPENDING", "jobs", "work", "-", "+", "1000")) do
      assert.equal(1, tonumber(p[4]), p[1])
    end
    for _, h in ipairs(hosts) do assert.equal(0, h:stop()) end
    assert.equal(0, tonumber(srv:cli("XLEN", "jobs:retry:work")))
  end)
end)
