-- The group's retry stream on a real redis-server: what the group has
-- acknowledged there is trimmed by the hosts' sweeps (soon after a host is
-- done with an entry of it, else at the sweep a minute after the last), so copies of
-- always-retrying entries do not pile up; an entry still pending or not yet
-- delivered there is never trimmed; the shared stream is never trimmed.
local helper = require "tests.integration.helper"

local READY = 'msg="host ready"'
local RETRY = "payments:retry:ledger"

local function start_host(srv, files, args)
  local h = helper.host_start(args or {}, { server = srv, dir = helper.handlers_dir(files) })
  h:wait_log(READY, 20, { plain = true })
  return h
end

local function ids(srv, key)
  local out = {}
  for i, e in ipairs(srv:xrange(key)) do out[i] = e.id end
  return out
end

describe("the retry stream", function()
  after_each(helper.cleanup)

  it("ends empty once always-retrying entries are dead-lettered at the cap", function()
    local srv = helper.redis_start()
    local host = start_host(srv, {
      ["always_retry.lua"] = [[
local ls = require "luastream"
return {
  stream = "payments", group = "ledger", max_deliveries = 3, dead_letter = "payments.dead",
  handle = function() return ls.retry() end,
}
]],
    })
    local N = 50
    srv:pipe(helper.payment_commands(1, N, 5))
    helper.wait_until(function()
      local n = srv:xlen("payments.dead")
      return n >= N, n .. " dead letters"
    end, 20, N .. " dead letters")
    helper.wait_until(function()
      local n = srv:xlen(RETRY)
      return n == 0, n .. " entries on " .. RETRY
    end, 10, "the retry stream trimmed to nothing")
    assert.equal(N, srv:xlen("payments.dead"))
    local info = assert(srv:call("XINFO", "STREAM", RETRY))
    assert.equal(2 * N, info["entries-added"], "two copies of each went through it")
    assert.same({}, (srv:pending_ids(RETRY, "ledger")))
    assert.same({}, (srv:pending_ids("payments", "ledger")))
    assert.equal(N, srv:xlen("payments"), "the shared stream is never trimmed")
    assert.equal(0, host:stop())
  end)

  it("keeps every entry still pending or not yet delivered there", function()
    local srv = helper.redis_start()
    srv:cli("XGROUP", "CREATE", RETRY, "ledger", "0", "MKSTREAM")
    local a1 = srv:cli("XADD", RETRY, "*", "data", '{"id":1}')
    local a2 = srv:cli("XADD", RETRY, "*", "data", '{"id":2}')
    local a3 = srv:cli("XADD", RETRY, "*", "data", '{"id":3}')
    -- a host that crashed long ago read all three and acked the first and third
    srv:cli("XREADGROUP", "GROUP", "ledger", "old-host", "COUNT", "3", "STREAMS", RETRY, ">")
    srv:cli("XACK", RETRY, "ledger", a1, a3)
    local later = {}
    for i = 4, 7 do later[#later + 1] = srv:cli("XADD", RETRY, "*", "data", '{"id":' .. i .. '}') end

    -- one lane, a handler that does not come back: 4 runs, the rest wait
    local HANG = [[
local ls = require "luastream"
return {
  stream = "payments", group = "ledger", workers = 1, batch = 1,
  handle = function(payment, ctx)
    ls.log.info("handler started", { entry_id = ctx.id })
    ls.sleep("1h")
  end,
}
]]
    local host = start_host(srv, { ["hang.lua"] = HANG }, { "--shutdown-timeout", "1s" })
    host:wait_records({ msg = "handler started", entry_id = later[1] }, 1, 10, "4 started")
    -- a1 goes at the sweep at start; a3 stays behind the pending a2
    helper.wait_until(function()
      local n = srv:xlen(RETRY)
      return n == 6, n .. " entries on " .. RETRY
    end, 10, "a1 trimmed")
    assert.same({ a2, a3, later[1], later[2], later[3], later[4] }, ids(srv, RETRY))

    -- the old host's a2 acknowledged after all: the next sweep of any host of
    -- the group trims a2 and a3 (this host's next is a minute away; another
    -- host of the group sweeps as it starts)
    srv:cli("XACK", RETRY, "ledger", a2)
    local second = start_host(srv, { ["hang.lua"] = HANG },
      { "--shutdown-timeout", "1s", "--consumer", "second" })
    helper.wait_until(function()
      local n = srv:xlen(RETRY)
      return n <= 4, n .. " entries on " .. RETRY
    end, 10, "a2 and a3 trimmed")
    assert.same(later, ids(srv, RETRY), "4..7 pending or not yet delivered: kept")
    local pending = srv:pending_ids(RETRY, "ledger")
    assert.equal(later[1], pending[1])
    assert.equal(0, srv:xlen("payments"), "nothing written to the shared stream")
    second:stop()
    host:stop()
  end)
end)
