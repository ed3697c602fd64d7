-- workers = 8, by_key = true: payments of one account are posted in stream
-- order, while lanes of different accounts run at the same time.
local helper = require "tests.integration.helper"

local READY = 'msg="host ready"'
local POSTED = { msg = "payment posted" }

-- All lanes share the file's Lua state, so `sleeping` counts the handlers
-- waiting in ls.sleep at this moment, across lanes.
local HANDLER = [[
local ls = require "luastream"
local sleeping, most = 0, 0

return {
  stream = "payments", group = "ledger",
  workers = 8, by_key = true,
  handle = function(payment, ctx)
    sleeping = sleeping + 1
    if sleeping > most then most = sleeping end
    local ms = math.random(0, 3)
    ls.sleep(ms)
    sleeping = sleeping - 1
    ls.log.info("payment posted", {
      payment_id = payment.id, account = payment.account, slept_ms = ms, most_sleeping = most,
    })
  end,
}
]]

-- 20 accounts on 8 lanes: a key holds a lane only while one of its payments
-- runs, so the lanes run side by side.
local ACCOUNTS = {
  "acct-17", "acct-28", "acct-36", "acct-52", "acct-115", "acct-136", "acct-163", "acct-167", "acct-175", "acct-182",
  "acct-204", "acct-209", "acct-220", "acct-223", "acct-228", "acct-229", "acct-235", "acct-277", "acct-285", "acct-296",
}

describe("per-key order on 8 lanes", function()
  after_each(helper.cleanup)

  it("posts each account's payments in stream order, lanes running concurrently", function()
    local N = 2000
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["post_by_account.lua"] = HANDLER })
    local host = helper.host_start({}, { server = srv, dir = dir })
    host:wait_log(READY, 20, { plain = true })

    srv:pipe(helper.payment_commands(1, N, ACCOUNTS))
    host:wait_records(POSTED, N, 90, N .. " payments posted")
    assert.equal(0, host:stop())
    local posted = host:records(POSTED)
    assert.equal(N, #posted)

    -- exactly once, and per account in stream order (ids were published in order)
    local seen, last, most = {}, {}, 0
    for _, rec in ipairs(posted) do
      local id = tonumber(rec.payment_id)
      assert(not seen[id], "payment posted twice: " .. rec.payment_id)
      seen[id] = true
      local account = rec.account
      assert.equal(helper.account_of(id, ACCOUNTS), account)
      if last[account] then
        assert(id > last[account], string.format("%s: payment %d posted after %d", account, id, last[account]))
      end
      last[account] = id
      most = math.max(most, tonumber(rec.most_sleeping))
    end

    -- concurrency: several handlers were asleep at once. (Not how long the run
    -- took against the sum of the sleeps: that is throughput, which a busy
    -- machine changes; the counter says what must happen.)
    assert(most > 1, "at most " .. most .. " handler(s) slept at the same time")
  end)
end)
