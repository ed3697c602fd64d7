-- Redis Sentinel over TLS (rediss+sentinel://): the master, its replica and
-- three sentinels speak only TLS and ask for client certificates; replication
-- and the sentinels' own links are TLS too. The host, given the sentinels and
-- a client certificate, runs the shipped ledger (handlers/before-8.4,
-- exactly-once writes with ctx:write) while payments arrive; the master is
-- SIGKILLed, the sentinels promote the replica and the host follows them to
-- it over TLS. What the dead master had not passed on is published again (as
-- a producer that got no answer would); at the end each payment is posted
-- exactly once on the new master.
local cjson = require "cjson"
local helper = require "tests.integration.helper"
local ledger = require "tests.integration.support.ledger"
local processes = require "tests.integration.support.processes"
local sentinels = require "tests.integration.support.sentinels"
local tls = require "tests.integration.support.tls"

local PAYMENTS = 1000
local LEDGER = { payments = PAYMENTS }
local MIN_IDLE_MS = 1000
local READY = 'msg="host ready"'
local SHIPPED = helper.repo_root .. "/handlers/before-8.4/"

local function ledger_dir()
  local recover, n = helper.read_file(SHIPPED .. "recover_payment.lua")
    :gsub("(local MIN_IDLE%s*=%s*)[^\n%-]+", "%1" .. MIN_IDLE_MS .. " ")
  assert.equal(1, n, "no `local MIN_IDLE = ...` line in recover_payment.lua")
  return helper.handlers_dir({
    ["post_new_payment.lua"] = helper.read_file(SHIPPED .. "post_new_payment.lua"),
    ["recover_payment.lua"] = recover,
  })
end

-- Publishes again the payments of first..last that srv's stream lacks.
local function publish_missing(srv, first, last)
  local seen = {}
  for _, e in ipairs(srv:xrange("payments")) do seen[cjson.decode(e.fields.data).id] = true end
  local missing = {}
  for _, cmd in ipairs(ledger.commands(first, last, LEDGER)) do
    if not seen[cjson.decode(cmd[5]).id] then missing[#missing + 1] = cmd end
  end
  if #missing > 0 then srv:pipe(missing) end
  return #missing
end

describe("Redis Sentinel over TLS", function()
  after_each(helper.cleanup)

  it("follows a failover over rediss+sentinel:// with a client certificate, every payment posted once #slow", function()
    local certs = tls.redis_certs()
    local set = sentinels.start({ tls = tls.server_opts(certs) })
    assert.matches("^rediss%+sentinel://", set.url)
    -- the sentinels answer on TLS only
    local code = processes.run({ "redis-cli", "-p", tostring(set.sentinels[1].port), "PING" }, { timeout = 10 })
    assert.is_not.equal(0, code)
    local old, new = set.master, set.replica

    local h = helper.host_start(tls.client_args(certs), { url = set.url, dir = ledger_dir() })
    h:wait_log(READY, 30, { plain = true })

    local half = PAYMENTS / 2
    local pub = old:pipe_async(ledger.commands(1, half, LEDGER))
    helper.wait_until(function() return old:xlen("payments.posted") > 50 end, 30, "payments being posted")
    old:kill()
    if not pub:wait(30) then
      pub:kill("KILL")
      pub:wait(5)
    end

    set:wait_master(new, 30)
    local republished = publish_missing(new, 1, half)
    new:pipe(ledger.commands(half + 1, PAYMENTS, LEDGER))

    ledger.wait_posted(new, LEDGER, 60)
    local switched = h:records({ msg = "redis master switched" })
    local new_addr = "127.0.0.1:" .. new.port
    local reconnected = h:records(function(r) return r.msg == "redis connected" and r.master == new_addr end)
    assert.is_true(h:alive())
    assert.equal(0, h:stop(30), "host exit status")
    io.stderr:write(string.format("tls sentinel: %d payments, %d republished after the failover\n", PAYMENTS, republished))
    ledger.assert_exact(new, LEDGER)
    assert.is_true(#switched >= 1, "no 'redis master switched' line in the host's log")
    assert.equal(new_addr, switched[1].to)
    assert.is_true(#reconnected >= 1, "no 'redis connected' line naming the new master " .. new_addr)
  end)
end)
