-- max_in_flight on a real server (host/consumer/inflight.c,
-- host/broker/scripts/inflight.lua): three hosts of 8 lanes each never run
-- more than 3 handlers at once, and the slots of a host killed with SIGKILL
-- come back within their lease (20 s).
local helper = require "tests.integration.helper"

local READY = 'msg="host ready"'

-- Each handler counts itself in and out of "running" on the server, keeping
-- the most seen in "most": the server runs one script at a time, so the
-- count is exact whatever the hosts' timing.
local CAPPED = [[
local ls = require "luastream"

local TRACK = "local n = redis.call('INCRBY', KEYS[1], ARGV[1]) " ..
  "if n > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], n) end " ..
  "return n"

return {
  stream = "jobs", group = "workers",
  workers = 8, max_in_flight = 3,
  handle = function(job, ctx)
    ls.redis.call("EVAL", TRACK, 2, "running", "most", 1)
    ls.log.info("job started", { n = job.n, consumer = ctx.consumer })
    ls.sleep(job.ms)
    ls.redis.call("EVAL", TRACK, 2, "running", "most", -1)
    ls.redis.call("INCR", "finished")
  end,
}
]]

local SLOTS = "luastream:inflight:{jobs}:workers"

-- One handler per key at a time over the fleet: "running:<key>" and
-- "most:<key>" per key, "running" and "most" over all keys.
local PER_KEY = [[
local ls = require "luastream"

local TRACK = "local n = redis.call('INCRBY', KEYS[1], ARGV[1]) " ..
  "if n > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], n) end " ..
  "return n"

return {
  stream = "jobs", group = "workers",
  workers = 8, max_in_flight_per_key = 1,
  handle = function(job, ctx)
    local key = ctx.headers[ls.PARTITION_KEY_HEADER]
    ls.redis.call("EVAL", TRACK, 2, "running:" .. key, "most:" .. key, 1)
    ls.redis.call("EVAL", TRACK, 2, "running", "most", 1)
    ls.sleep(300)
    ls.redis.call("EVAL", TRACK, 2, "running", "most", -1)
    ls.redis.call("EVAL", TRACK, 2, "running:" .. key, "most:" .. key, -1)
    ls.redis.call("INCR", "finished")
  end,
}
]]

local function start_hosts(srv, dir, names)
  local out = {}
  for _, name in ipairs(names) do
    out[name] = helper.host_start({ "--consumer", name, "--shutdown-timeout", "100ms" },
      { server = srv, dir = dir })
  end
  for _, name in ipairs(names) do out[name]:wait_log(READY, 30, { plain = true }) end
  return out
end

local function publish(srv, from, to, ms)
  local cmds = {}
  for n = from, to do
    cmds[#cmds + 1] = { "XADD", "jobs", "*", "data", string.format('{"n":%d,"ms":%d}', n, ms) }
  end
  srv:pipe(cmds)
end

describe("max_in_flight", function()
  after_each(helper.cleanup)

  it("never runs more than 3 handlers across three hosts of 8 lanes #slow", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["capped.lua"] = CAPPED })
    local hosts = start_hosts(srv, dir, { "host-a", "host-b", "host-c" })
    publish(srv, 1, 45, 400)
    helper.wait_until(function() return tonumber(srv:cli("GET", "finished")) == 45 end, 90,
      "45 jobs finished")
    assert.equal("3", srv:cli("GET", "most"), "the cap was reached and never passed")
    assert.equal("0", srv:cli("GET", "running"))
    local ran = 0
    for _, h in pairs(hosts) do
      local n = h:count({ msg = "job started" })
      ran = ran + n
    end
    assert.equal(45, ran, "each job ran once")
    helper.wait_until(function() return srv:cli("ZCARD", SLOTS) == "0" end, 10, "every slot given back")
    for _, h in pairs(hosts) do h:stop() end
  end)

  it("gives the slots of a host killed with SIGKILL back within the lease #slow", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["capped.lua"] = CAPPED })
    local a = start_hosts(srv, dir, { "host-a" })["host-a"]
    publish(srv, 1, 3, 600000)
    a:wait_records({ msg = "job started" }, 3, 20, "host-a running 3 jobs")
    assert.equal("3", srv:cli("ZCARD", SLOTS))
    local others = start_hosts(srv, dir, { "host-b", "host-c" })
    a:signal("KILL")
    assert.is_truthy(a:wait_exit(10))
    local killed = helper.now()
    publish(srv, 4, 6, 100)
    local first
    helper.wait_until(function()
      for _, h in pairs(others) do
        if h:count({ msg = "job started" }) > 0 then first = first or helper.now() end
      end
      return first ~= nil
    end, 40, "a job started on host-b or host-c")
    local after = first - killed
    -- host-a renewed its slots every 5 s until it died (later on a loaded
    -- machine: the bound below leaves room); each lease is 20 s from its
    -- last renewal; the others ask every 100 ms
    assert.is_true(after >= 10, string.format("started %.1f s after the kill: a's slots were still held", after))
    assert.is_true(after <= 23, string.format("started %.1f s after the kill", after))
    helper.wait_until(function() return tonumber(srv:cli("GET", "finished")) == 3 end, 20, "3 jobs finished")
    for _, h in pairs(others) do h:stop() end
  end)

  it("max_in_flight_per_key = 1: never two handlers of one key at once across three hosts #slow", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["per_key.lua"] = PER_KEY })
    local hosts = start_hosts(srv, dir, { "host-a", "host-b", "host-c" })
    local cmds = {}
    for n = 1, 30 do
      cmds[#cmds + 1] = { "XADD", "jobs", "*", "data", string.format('{"n":%d}', n), "partition-key", "k" .. (n % 3) }
    end
    srv:pipe(cmds)
    helper.wait_until(function() return tonumber(srv:cli("GET", "finished")) == 30 end, 90, "30 jobs finished")
    for k = 0, 2 do assert.equal("1", srv:cli("GET", "most:k" .. k), "key k" .. k) end
    assert.is_true(tonumber(srv:cli("GET", "most")) >= 2, "keys ran side by side")
    for _, h in pairs(hosts) do h:stop() end
  end)
end)
