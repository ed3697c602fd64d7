-- max_run on a real server (host/consumer/heartbeat.c): a handler that runs
-- past it is logged once and counted, and its entry, no longer kept
-- claimed, is taken by the other host's claiming read once idle min_idle,
-- while the first handler runs on to its end.
local helper = require "tests.integration.helper"

local READY = 'msg="host ready"'
local OVERRAN = "handler ran longer than max_run: its entry is no longer kept claimed, and " ..
  "another consumer's claiming or reclaim read may take it once idle min_idle (the handler is " ..
  "not stopped)"

local RUNAWAY = [[
local ls = require "luastream"

return {
  stream = "jobs", group = "workers",
  read = "claiming", claim_fallback = true, min_idle = "1s", max_run = "2s",
  batch = 1,
  handle = function(job, ctx)
    ls.log.info("job started", { n = job.n, consumer = ctx.consumer })
    ls.sleep(6000)
    ls.log.info("job finished", { n = job.n, consumer = ctx.consumer })
  end,
}
]]

-- The value of the sample name{labels...} on a metrics page, or nil.
local function sample(page, name, labels)
  for line in page:gmatch("[^\n]+") do
    local n, set, v = line:match("^([%w_]+){(.*)} (%S+)$")
    if n == name then
      local all = true
      for k, want in pairs(labels) do
        if not set:find(k .. '="' .. want .. '"', 1, true) then all = false end
      end
      if all then return tonumber(v) end
    end
  end
end

describe("max_run", function()
  after_each(helper.cleanup)

  it("lets the other host take the entry of a handler running past it, logged and counted once, the handler running on #slow", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["runaway.lua"] = RUNAWAY })
    local hosts = {}
    for _, name in ipairs({ "host-a", "host-b" }) do
      hosts[name] = helper.host_start({ "--consumer", name, "--http", "127.0.0.1:0", "--shutdown-timeout", "100ms" },
        { server = srv, dir = dir })
      hosts[name]:wait_log(READY, 20, { plain = true })
    end
    local id = srv:call("XADD", "jobs", "*", "data", '{"n":1}')
    local first
    helper.wait_until(function()
      for name, host in pairs(hosts) do
        if host:count({ msg = "job started" }) > 0 then first = name end
      end
      return first ~= nil
    end, 10, "one host to start the job")
    local t0 = helper.now()
    local other = first == "host-a" and hosts["host-b"] or hosts["host-a"]
    local warned = hosts[first]:wait_records({ msg = OVERRAN }, 1, 5, "the overrun logged")[1]
    assert.equal("warn", warned.level)
    assert.equal("runaway", warned.handler)
    assert.equal("jobs", warned.stream)
    assert.equal("workers", warned.group)
    assert.equal(id, warned.id)
    assert.is_true(tonumber(warned.ran_ms) > 2000, warned._line)
    local taken = other:wait_records({ msg = "job started" }, 1, 5, "the other host taking the job")[1]
    assert.equal(other == hosts["host-a"] and "host-a" or "host-b", taken.consumer)
    -- max_run (2 s), then idle min_idle (1 s) since the last beat, then a read (within 1 s)
    local took = helper.now() - t0
    assert.is_true(took < 5, string.format("taken %.2f s after it started", took))
    local labels = { handler = "runaway", stream = "jobs", group = "workers" }
    local _, page = helper.http_get(helper.health_port(hosts[first]), "/metrics")
    assert.equal(1, sample(page, "luastream_handler_overran_total", labels), page)
    hosts[first]:wait_records({ msg = "job finished" }, 1, 10, "the first handler running to its end")
    assert.equal(1, hosts[first]:count({ msg = OVERRAN }), "logged once")
    for _, host in pairs(hosts) do host:stop() end
  end)
end)
