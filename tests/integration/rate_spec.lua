-- ls.rate.take against a real redis-server: two hosts share one limiter,
-- so their permits together keep to its rate in every second (each permit's
-- time is Redis's own, recorded in the same script call as the count).
local helper = require "tests.integration.helper"

local READY = 'msg="host ready"'

local API = [[
local ls = require "luastream"

return {
  stream = "calls", group = "api", start = "beginning", workers = 4, batch = 4, -- a few each: both hosts read
  handle = function()
    ls.rate.take("api", "20/s")
    ls.redis.call("EVAL", "local t = redis.call('TIME') " ..
      "return redis.call('RPUSH', KEYS[1], t[1] * 1000000 + t[2])", 1, "permits")
    ls.log.info("permit")
  end,
}
]]

describe("ls.rate.take on a real server", function()
  after_each(helper.cleanup)

  it("keeps two hosts together within the limit in every second #slow", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["api.lua"] = API })
    -- a name each: two hosts started at once both take the unnumbered one
    local a = helper.host_start({ "--instance", "0" }, { server = srv, dir = dir })
    local b = helper.host_start({ "--instance", "1" }, { server = srv, dir = dir })
    a:wait_log(READY, 20, { plain = true })
    b:wait_log(READY, 20, { plain = true })
    assert(srv:call("EVAL", "for i = 1, 80 do redis.call('XADD', KEYS[1], '*', 'data', '{}') end return 1", "1", "calls"))
    helper.wait_until(function() return tonumber(srv:cli("LLEN", "permits")) == 80 end, 30, "80 permits")
    local times = {}
    for _, t in ipairs(srv:call("LRANGE", "permits", "0", "-1")) do times[#times + 1] = tonumber(t) end
    table.sort(times)
    -- 20/s spaces permits 50 ms apart (the burst is one permit): any second
    -- holds at most 20 (one more for the time between a grant and its record)
    for i = 1, #times do
      local n = 0
      for j = i, #times do
        if times[j] < times[i] + 1000000 then n = n + 1 end
      end
      assert(n <= 21, string.format("%d permits in the second from permit %d", n, i))
    end
    assert(times[#times] - times[1] >= 79 * 50000 - 20000,
           string.format("80 permits in %d us", times[#times] - times[1]))
    assert.is_true(a:count({ msg = "permit" }) > 0)
    assert.is_true(b:count({ msg = "permit" }) > 0)
    assert.equal(80, a:count({ msg = "permit" }) + b:count({ msg = "permit" }))
    assert.equal(0, a:stop())
    assert.equal(0, b:stop())
  end)
end)
