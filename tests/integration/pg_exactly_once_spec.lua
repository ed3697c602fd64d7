-- Exactly once into PostgreSQL under faults: the shipped example
-- (handlers/postgres/post_payment.lua: ctx:pg_once records the entry and
-- writes the ledger row and the balance in one transaction) on two hosts.
-- While payments are published and handled, the spec SIGKILLs and restarts a
-- host, SIGSTOPs a host past min_idle (the other claims its entries, and its
-- open transaction holds the entry's key until it resumes), and restarts
-- PostgreSQL (queries in flight fail, their entries come back later). The
-- ledger table here has no primary key, so a payment posted twice would
-- show: at the end every payment is in it exactly once, every balance is the
-- exact sum, nothing is pending and nothing was rejected.
local helper = require "tests.integration.helper"

local PAYMENTS, ACCOUNTS = 900, 12
local READY = 'msg="host ready"'
local EXAMPLE = helper.repo_root .. "/handlers/postgres/post_payment.lua"

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

describe("ctx:pg_once under faults", function()
  after_each(helper.cleanup)

  it("posts every payment into PostgreSQL once while hosts are killed and stalled and the database restarts", function()
    local srv = helper.redis_start()
    local pg = helper.postgres_start()
    pg:psql([[
      CREATE TABLE ledger (payment_id bigint NOT NULL, account text NOT NULL,
                           amount_cents bigint NOT NULL, posted_at timestamptz DEFAULT now());
      CREATE TABLE balances (account text PRIMARY KEY, cents bigint NOT NULL);
      GRANT ALL ON ledger, balances TO luastream;
      GRANT CREATE ON SCHEMA public TO luastream;]])
    -- min_idle 1 s, so that a stalled host's entries are claimed within the test
    local dir = helper.handlers_dir({
      ["post_payment.lua"] = helper.read_file(EXAMPLE):gsub("local MIN_IDLE = 30000", "local MIN_IDLE = 1000"),
    })
    local env = { LUASTREAM_POSTGRES = pg.url }
    local hosts = {}
    local function start(k)
      hosts[k] = helper.host_start({ "--consumer", "h" .. k, "--pg-timeout", "3s" },
        { server = srv, dir = dir, env = env })
      hosts[k]:wait_log(READY, 20, { plain = true })
    end
    start(1)
    start(2)
    local stopped
    finally(function() if stopped and stopped:alive() then stopped:signal("CONT") end end)

    local chunk = PAYMENTS / 3
    -- 1: a host killed mid-chunk, and started again under its name
    srv:pipe(xadds(1, chunk))
    hosts[1]:wait_records({ msg = "payment posted" }, 20, 20, "host 1 posting")
    hosts[1]:signal("KILL")
    hosts[1]:wait_exit(10)
    start(1)
    -- 2: a host stalled past min_idle with entries in hand, then resumed
    srv:pipe(xadds(chunk + 1, 2 * chunk))
    hosts[2]:wait_records({ msg = "payment posted" }, 1, 20, "host 2 posting")
    hosts[2]:signal("STOP")
    stopped = hosts[2]
    helper.wait_until(function() return helper.proc_state(hosts[2].proc.pid) == "T" end, 5, "host 2 stopped")
    helper.wait_until(function()
      local n = #hosts[1]:records({ msg = "payment posted" })
      return n >= chunk / 2, n .. " posted by host 1"
    end, 60, "host 1 taking over")
    hosts[2]:signal("CONT")
    stopped = nil
    -- 3: PostgreSQL restarted under load
    srv:pipe(xadds(2 * chunk + 1, PAYMENTS))
    hosts[1]:wait_records({ msg = "payment posted" }, chunk, 60, "host 1 busy again")
    pg:restart()

    helper.wait_until(function()
      local n = tonumber(pg:psql("SELECT count(DISTINCT payment_id) FROM ledger"))
      local pending = srv:call("XPENDING", "payments", "ledger-pg")
      return n == PAYMENTS and pending and pending[1] == 0, n .. " posted"
    end, 120, "every payment posted and acked")

    assert.equal(tostring(PAYMENTS), pg:psql("SELECT count(*) FROM ledger"))
    assert.equal("", pg:psql("SELECT payment_id FROM ledger GROUP BY payment_id HAVING count(*) > 1"))
    local want = {}
    for i = 1, PAYMENTS do
      local a = helper.account_of(i, ACCOUNTS)
      want[a] = (want[a] or 0) + amount_of(i)
    end
    local got = {}
    for line in pg:psql("SELECT account || ' ' || cents FROM balances"):gmatch("[^\n]+") do
      local a, c = line:match("^(%S+) (%-?%d+)$")
      got[a] = tonumber(c)
    end
    assert.same(want, got)
    for _, h in ipairs(hosts) do
      assert.equal(0, h:count({ msg = "entry rejected, acked (no dead_letter stream)" }))
      assert.equal(0, h:count({ msg = "entry dead-lettered" }))
    end
    -- the claims and the database restart were seen, so the faults did bite
    local retried = 0
    for _, h in ipairs(hosts) do retried = retried + h:count({ msg = "ledger write failed, retrying" }) end
    assert.is_true(retried > 0, "no write failed across the database restart")
    for _, h in ipairs(hosts) do assert.equal(0, h:stop()) end
  end)

  it("rejects a second entry carrying a payment id already in the ledger, writing nothing for it", function()
    local srv = helper.redis_start()
    local pg = helper.postgres_start()
    pg:psql(helper.read_file(helper.repo_root .. "/handlers/postgres/schema.sql")
      .. "GRANT ALL ON ledger, balances TO luastream; GRANT CREATE ON SCHEMA public TO luastream;")
    local dir = helper.handlers_dir({ ["post_payment.lua"] = helper.read_file(EXAMPLE) })
    local host = helper.host_start({ "--consumer", "h1" }, { server = srv, dir = dir, env = { LUASTREAM_POSTGRES = pg.url } })
    host:wait_log(READY, 20, { plain = true })
    srv:pipe({
      { "XADD", "payments", "*", "data", helper.payment(7, "acct-a", 100) },
      { "XADD", "payments", "*", "data", helper.payment(7, "acct-a", 100) }, -- the same payment id again
      { "XADD", "payments", "*", "data", helper.payment(8, "acct-a", 5) },
    })
    local dead = host:wait_records({ msg = "entry dead-lettered" }, 1, 20, "the second entry rejected")[1]
    assert.equal("rejected", dead.reason)
    local letters = srv:call("XRANGE", "payments.dead", "-", "+")
    assert.equal(1, #letters)
    assert.truthy(table.concat(letters[1][2], " "):find("payment 7 is in the ledger already", 1, true),
      table.concat(letters[1][2], " "))
    host:wait_records({ msg = "payment posted" }, 2, 20, "payments 7 and 8 posted")
    helper.wait_until(function()
      local pending = srv:call("XPENDING", "payments", "ledger-pg")
      return pending and pending[1] == 0
    end, 20, "nothing pending")
    assert.equal("7,8", pg:psql("SELECT string_agg(payment_id::text, ',' ORDER BY payment_id) FROM ledger"))
    assert.equal("105", pg:psql("SELECT cents FROM balances WHERE account = 'acct-a'"))
    assert.equal(0, host:stop())
  end)
end)
