-- Every reply reaches the command that asked for it on a real Redis Cluster,
-- while one master's slots migrate to another (ASK, then MOVED) and a third
-- master fails over to its replica. 32 handler jobs at a time each send
-- INCRBY to fresh keys over every slot through ls.redis.call, so the calls
-- connection has commands in flight on every master at once; the reply to
-- INCRBY of a fresh key is the amount it was given, unique to that command,
-- so a reply handed to another command shows. A call cut off by the
-- migration or the failover raises, and the entry is retried (claimed
-- again) with fresh keys. Each entry, once all its replies matched, is recorded in a set on
-- the stream's slot (ctx:write: with its ack).
local helper = require "tests.integration.helper"
local cluster = require "tests.integration.support.cluster"
local processes = require "tests.integration.support.processes"
local cjson = require "cjson"

local READY = 'msg="host ready"'
local STREAM = "{calls}"
local CALLS = 12 -- commands per entry

local CHECK = [[
local ls = require "luastream"
local CALLS = ]] .. CALLS .. [[

return {
  stream = "{calls}", group = "check", start = "beginning", workers = 32, batch = 64,
  -- an entry whose outcome could not be written while the cluster was down
  -- (CLUSTERDOWN until the replica took over) is claimed again; one whose
  -- calls are cut off again and again (each MOVED of the migration takes
  -- the connection down for a moment) is not dead-lettered: only a
  -- mismatch is
  read = "claiming", claim_fallback = true, min_idle = "1s", max_deliveries = false,
  dead_letter = "{calls}.dead",
  handle = function(m, ctx)
    for i = 1, CALLS do
      -- a fresh key for every delivery: one cut off may have run
      local key = string.format("chk:%d:%d:%d", m.n, i, ctx.deliveries)
      local amount = m.n * 100 + i
      local ok, got = pcall(ls.redis.call, "INCRBY", key, amount)
      if not ok then
        ls.log.info("call cut off, entry retried", { n = m.n, error = tostring(got) })
        return ls.retry()
      end
      if got ~= amount then
        ls.log.error("reply mismatch", { n = m.n, key = key, sent = amount, got = tostring(got) })
        return ls.reject("INCRBY " .. key .. " " .. amount .. " answered " .. tostring(got))
      end
    end
    ctx:write("SADD", "{calls}:done", m.n)
    return ls.ack()
  end,
}
]]

local function entries(first, last)
  local cmds = {}
  for n = first, last do cmds[#cmds + 1] = { "XADD", STREAM, "*", "data", string.format('{"n":%d}', n) } end
  return cmds
end

describe("a Redis Cluster with commands in flight on every master", function()
  after_each(helper.cleanup)

  it("hands every reply to its own command through a slot migration and a failover", function()
    local c = cluster.start { masters = 3, replicas = 1 }
    local N = 3000
    assert(c:master_of(STREAM):call("XGROUP", "CREATE", STREAM, "check", "0", "MKSTREAM"))
    c:run(entries(1, N / 3))
    local dir = helper.handlers_dir({ ["check.lua"] = CHECK })
    local host = helper.host_start({ "--redis", c.url }, { dir = dir })
    host:wait_log(READY, 30, { plain = true })

    -- the masters other than the stream's: one gives 2000 of its slots to
    -- the stream's master (not all: a master without slots has no vote, and
    -- the failover needs a majority of the masters), the other fails over
    local stream_master = c:master_of(STREAM)
    local others = {}
    for i = 1, 3 do
      if c.nodes[i] ~= stream_master then others[#others + 1] = c.nodes[i] end
    end
    local from, dying = others[1], others[2]
    local reshard = processes.spawn({ "redis-cli", "--cluster", "reshard", "127.0.0.1:" .. from.port,
      "--cluster-from", c:id_of(from), "--cluster-to", c:id_of(stream_master),
      "--cluster-slots", "2000", "--cluster-yes", "--cluster-pipeline", "10" },
      { stdout = helper.tmpdir("reshard") .. "/out" })
    c:run(entries(N / 3 + 1, 2 * N / 3))
    assert.equal(0, reshard:wait(180))
    -- one fault at a time: redis-cli refuses to migrate while slots are uncovered
    local mark = host:mark()
    dying:kill()
    c:run(entries(2 * N / 3 + 1, N))
    host:wait_log('msg="redis cluster slot map"', 30, { plain = true, after = mark })
    c:wait_ok(30)

    local ok, err = pcall(processes.wait_until, function()
      local done = c:call("SCARD", STREAM .. ":done") or 0
      return done >= N, done .. " of " .. N .. " entries checked"
    end, 60, "every entry's replies checked")
    if not ok then -- what the group and the host say
      local pending = c:master_of(STREAM):call("XPENDING", STREAM, "check", "-", "+", "5")
      error(err .. "\npending: " .. cjson.encode(pending or {}) .. "\nwarnings and errors:\n"
        .. table.concat(host:lines("level=[ew][ra]", false), "\n"))
    end
    assert.equal(0, host:count { msg = "reply mismatch" })
    assert.equal(0, c:call("XLEN", STREAM .. ".dead"))
    assert.equal(N, c:call("SCARD", STREAM .. ":done"))
    -- the host followed the migration and the failover
    assert.truthy(host:count { msg = "redis cluster slot map" } >= 2, "the host saw the new maps")
    assert.equal(0, host:stop())
  end)
end)
