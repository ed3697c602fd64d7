-- Exactly once into PostgreSQL under faults: the shipped example
-- (handlers/postgres/post_payment.lua: ctx:pg_once records the entry and
-- writes the ledger row and the balance in one transaction) on two hosts.
-- While payments are published and handled, the spec SIGKILLs and restarts a
-- host, SIGSTOPs a host past min_idle (the other claims its entries, and its
-- open transaction holds the entry's key until it resumes), and stops
-- PostgreSQL while payments arrive, starting it again once a write has
-- failed (the failed entries come back later). The
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

  it("posts every payment into PostgreSQL once while hosts are killed and stalled and the database restarts #slow", function()
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
    local function posted(h) return h:count({ msg = "payment posted" }) end
    local function held_by(k) return assert(srv:call("XPENDING", "payments", "ledger-pg", "-", "+", "100000", "h" .. k)) end
    -- 1: a host killed mid-chunk, and started again under its name. Either
    -- host may be handed most of the chunk (a read takes what has arrived):
    -- the one seen posting is killed.
    srv:pipe(xadds(1, chunk))
    local killed = helper.wait_until(function()
      for k, h in ipairs(hosts) do if posted(h) >= 20 then return k end end
    end, 60, "a host posting")
    hosts[killed]:signal("KILL")
    hosts[killed]:wait_exit(10)
    start(killed)
    -- 2: a host stalled past min_idle with entries in hand, then resumed
    srv:pipe(xadds(chunk + 1, 2 * chunk))
    local stalled = helper.wait_until(function()
      for k = 1, 2 do if #held_by(k) > 0 then return k end end
    end, 60, "a host holding entries")
    hosts[stalled]:signal("STOP")
    stopped = hosts[stalled]
    helper.wait_until(function() return helper.proc_state(hosts[stalled].proc.pid) == "T" end, 5, "the host stopped")
    -- The other claims every entry the stalled host holds once it is past
    -- min_idle: wait for that, not for the other to post some share of the
    -- chunk (how much the stalled host posted before the stop depends on timing).
    helper.wait_until(function()
      local n = #held_by(stalled)
      return n == 0, n .. " still held by the stalled host"
    end, 60, "the other host taking over the stalled host's entries")
    hosts[stalled]:signal("CONT")
    stopped = nil
    -- 3: PostgreSQL down while payments arrive, started again once a write
    -- has failed. Stopped first, so that writes fail for certain: a restart
    -- that lands between two writes fails none (the pool reconnects). Only
    -- failures logged from here on, on the connection (SQLSTATE class 08),
    -- count: not step 2's (a write blocked behind the stalled host's open
    -- transaction times out).
    local marks = { hosts[1]:mark(), hosts[2]:mark() }
    local function connection_failures()
      local n = 0
      for k, h in ipairs(hosts) do
        n = n + h:count(function(rec)
          return rec._pos > marks[k] and rec.msg == "ledger write failed, retrying" and (rec.error or ""):match("^08") ~= nil
        end)
      end
      return n
    end
    pg:stop()
    srv:pipe(xadds(2 * chunk + 1, PAYMENTS))
    helper.wait_until(function() return connection_failures() > 0 end, 60, "a ledger write failing with the database down")
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
