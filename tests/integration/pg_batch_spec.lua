-- handle_batch into PostgreSQL exactly once: the shipped example
-- (handlers/postgres_batch/post_payments.lua: each call's payments in one
-- multi-row INSERT, in one transaction with ctx:pg_once_batch's record of
-- every entry) against a real redis-server and a real PostgreSQL. Payments
-- arrive as calls run; a second entry carrying a payment id already posted
-- is rejected; a host SIGKILLed mid-way and started again posts nothing
-- twice: at the end every payment is in the ledger once and every balance is
-- the exact sum.
local helper = require "tests.integration.helper"

local READY = 'msg="host ready"'
local EXAMPLE = helper.repo_root .. "/handlers/postgres_batch/post_payments.lua"
local SCHEMA = helper.repo_root .. "/handlers/postgres/schema.sql"
local ACCOUNTS = 7

local function amount_of(i) return (i * 7919) % 20000 + 1 end

local function xadds(first, last)
  local cmds = {}
  for i = first, last do
    local account = helper.account_of(i, ACCOUNTS)
    cmds[#cmds + 1] = { "XADD", "payments", "*", "data", helper.payment(i, account, amount_of(i)),
      "partition-key", account }
  end
  return cmds
end

local function setup()
  local srv = helper.redis_start()
  local pg = helper.postgres_start()
  pg:psql(helper.read_file(SCHEMA) .. "GRANT ALL ON ledger, balances TO luastream; GRANT CREATE ON SCHEMA public TO luastream;")
  return srv, pg
end

-- Every payment 1..n posted once, the balances their sums, nothing pending.
local function assert_posted(srv, pg, n)
  helper.wait_until(function()
    local posted = tonumber(pg:psql("SELECT count(*) FROM ledger"))
    local pending = srv:call("XPENDING", "payments", "ledger-pg-batch")
    return posted == n and pending and pending[1] == 0, posted .. " posted"
  end, 60, "every payment posted and acked")
  assert.equal(tostring(n), pg:psql("SELECT count(DISTINCT payment_id) FROM ledger"))
  local want = {}
  for i = 1, n do
    local a = helper.account_of(i, ACCOUNTS)
    want[a] = (want[a] or 0) + amount_of(i)
  end
  local got = {}
  for line in pg:psql("SELECT account || ' ' || cents FROM balances"):gmatch("[^\n]+") do
    local a, c = line:match("^(%S+) (%-?%d+)$")
    got[a] = tonumber(c)
  end
  assert.same(want, got)
end

describe("handle_batch with ctx:pg_once_batch", function()
  after_each(helper.cleanup)

  it("posts each call's payments in one transaction, once, and rejects a payment id posted before", function()
    local srv, pg = setup()
    local dir = helper.handlers_dir({ ["post_payments.lua"] = helper.read_file(EXAMPLE) })
    local host = helper.host_start({ "--consumer", "h1" }, { server = srv, dir = dir, env = { LUASTREAM_POSTGRES = pg.url } })
    host:wait_log(READY, 20, { plain = true })
    srv:pipe(xadds(1, 250))
    assert_posted(srv, pg, 250)
    local calls = host:records({ msg = "payments posted" })
    assert.is_true(#calls < 250, "payments went in calls of several: " .. #calls .. " calls")
    local most = 0
    for _, c in ipairs(calls) do most = math.max(most, tonumber(c.entries)) end
    assert.is_true(most > 1 and most <= 100, "the largest call held " .. most)
    assert.equal("250", pg:psql("SELECT count(*) FROM luastream_processed WHERE grp = 'ledger-pg-batch'"))
    -- the same payment id again, in another entry: rejected, nothing written
    srv:pipe({ { "XADD", "payments", "*", "data", helper.payment(7, "acct-x", 100) } })
    local dead = host:wait_records({ msg = "entry dead-lettered" }, 1, 20, "the second entry rejected")[1]
    assert.equal("rejected", dead.reason)
    assert_posted(srv, pg, 250)
    assert.equal(0, host:stop())
  end)

  it("rejects a payment PostgreSQL would refuse alone, posting the others of its call", function()
    local srv, pg = setup()
    local dir = helper.handlers_dir({ ["post_payments.lua"] = helper.read_file(EXAMPLE) })
    local host = helper.host_start({ "--consumer", "h1" }, { server = srv, dir = dir, env = { LUASTREAM_POSTGRES = pg.url } })
    host:wait_log(READY, 20, { plain = true })
    local cmds = xadds(1, 10)
    -- an id past bigint, and an account text cannot hold, amid the others
    table.insert(cmds, 4, { "XADD", "payments", "*", "data", '{"id":1e19,"account":"acct-1","amount_cents":5}' })
    table.insert(cmds, 8, { "XADD", "payments", "*", "data", '{"id":900,"account":"acct\\u0000x","amount_cents":5}' })
    srv:pipe(cmds)
    local dead = host:wait_records({ msg = "entry dead-lettered" }, 2, 20, "the two refused payments rejected")
    for _, d in ipairs(dead) do assert.equal("rejected", d.reason) end
    assert_posted(srv, pg, 10)
    assert.equal(0, host:count({ msg = "ledger write failed, retrying" }))
    assert.equal(0, host:stop())
  end)

  it("posts every payment once while a host is killed mid-way and started again #slow", function()
    local srv, pg = setup()
    -- min_idle 1 s: the killed host's entries come back within the test
    local dir = helper.handlers_dir({
      ["post_payments.lua"] = helper.read_file(EXAMPLE):gsub("local MIN_IDLE = 30000", "local MIN_IDLE = 1000"),
    })
    local env = { LUASTREAM_POSTGRES = pg.url }
    local hosts = {}
    local function start(k)
      hosts[k] = helper.host_start({ "--consumer", "h" .. k }, { server = srv, dir = dir, env = env })
      hosts[k]:wait_log(READY, 20, { plain = true })
    end
    start(1)
    start(2)
    local total = 0
    for round = 1, 4 do
      srv:pipe(xadds(total + 1, total + 300))
      total = total + 300
      if round == 2 then
        local killed = helper.wait_until(function()
          for k, h in ipairs(hosts) do if h:count({ msg = "payments posted" }) > 0 then return k end end
        end, 60, "a host posting")
        hosts[killed]:signal("KILL")
        hosts[killed]:wait_exit(10)
        start(killed)
      end
    end
    assert_posted(srv, pg, total)
    for _, h in ipairs(hosts) do
      assert.equal(0, h:count({ msg = "entry dead-lettered" }))
      assert.equal(0, h:stop())
    end
  end)
end)
