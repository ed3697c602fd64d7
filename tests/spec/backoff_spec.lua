-- ls.backoff (lua/luastream.lua): the delay before the next delivery from the
-- delivery count, and its option checks. Durations go through the host's
-- parser (the harness module outside a host).
local ls = require "luastream"

describe("ls.backoff", function()
  it("is base * factor^n capped at max; defaults 1s, 2, 5m, no jitter", function()
    local b = ls.backoff { base = "1s", factor = 2, max = "5m" }
    local d = ls.backoff()
    local flat = ls.backoff { base = "250ms", factor = 1 }
    assert.same({ 1000, 2000, 8000, 256000, 300000, 300000, 1000, 4000, 300000, 8000, 250, 250 },
      { b(0), b(1), b(3), b(8), b(9), b(100), d(0), d(2), d(20), b("3"), flat(0), flat(7) })
  end)

  it("reads ctx.deliveries, else a delivery-count header, else 0", function()
    local b = ls.backoff { base = "1s", factor = 2, max = "5m" }
    assert.equal(4000, b({ deliveries = 2, headers = { [ls.DELIVERY_COUNT_HEADER] = "5" } }))
    assert.equal(8000, b({ headers = { [ls.DELIVERY_COUNT_HEADER] = "3" } }))
    assert.equal(1000, b({ headers = {} }))
    assert.equal(1000, b(nil))
  end)

  it("spreads by +/- jitter, in whole milliseconds, never above max", function()
    local j = ls.backoff { base = 100, factor = 3, max = 1000, jitter = 0.5 }
    local function spread(n)
      local lo, hi, int = math.huge, -1, true
      for _ = 1, 500 do
        local v = j(n)
        lo, hi = math.min(lo, v), math.max(hi, v)
        if v ~= math.floor(v) then int = false end
      end
      return lo, hi, int
    end
    local lo0, hi0, int0 = spread(0)
    local lo5, hi5, int5 = spread(5)
    assert.is_true(lo0 >= 50 and hi0 <= 150)
    assert.is_true(lo0 < 90 and hi0 > 110)
    assert.is_true(int0 and int5)
    assert.is_true(lo5 >= 500 and hi5 == 1000)
    assert.is_true(lo5 < 900)
  end)

  it("refuses bad options at the caller's line", function()
    local cases = {
      { { factor = 0.5 }, "ls.backoff: factor must be a number >= 1" },
      { { jitter = 1 }, "ls.backoff: jitter must be a fraction in [0, 1)" },
      { { jitter = -0.1 }, "ls.backoff: jitter must be a fraction in [0, 1)" },
      { { base = "soon" }, "ls.backoff: base must be a duration" },
      { { max = {} }, "ls.backoff: max must be a duration" },
      { { factor = "2" }, "ls.backoff: factor must be a number >= 1" },
      { { factor = 0 }, "ls.backoff: factor must be a number >= 1" },
    }
    for _, case in ipairs(cases) do
      local line = debug.getinfo(1, "l").currentline + 1
      local ok, err = pcall(function() local b = ls.backoff(case[1]); return b end) -- not a tail call
      assert.is_false(ok)
      -- The position is this file's line (error(..., 2)), not luastream.lua's.
      assert.equal(debug.getinfo(1, "S").short_src .. ":" .. line .. ": " .. case[2], err)
    end
  end)
end)
