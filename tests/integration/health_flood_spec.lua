-- --http under a flood: 3,000 idle and 200 slow-loris connections, each
-- opened again as soon as the host closes it (support/flood.lua, a process of
-- its own), must not keep /healthz from answering every probe within 1 s,
-- nor the host from consuming. The host starts with a soft open-file limit
-- of 1024: raised to the hard limit when there is room, and with none
-- (`ulimit -n 1024`) the health endpoint keeps to its share of the 1024.
local helper = require "tests.integration.helper"
local files = require "tests.integration.support.files"
local sys = require "tests.integration.support.sys"
local registry = require "tests.integration.support.registry"

local READY = 'msg="host ready"'
local IDLE, SLOW = 3000, 200
local PROBE_S = 1 -- a liveness probe's default timeout
local FLOOD_S = 5 -- how long probes go on: past two request deadlines (2 s)
local PROBE_EVERY_MS = 25

local POST = [[
local ls = require "luastream"
return {
  stream = "payments", group = "ledger",
  handle = function(payment, ctx)
    ls.log.info("payment posted", { payment_id = payment.id })
  end,
}
]]

-- Starts the flood on port and waits until the host has closed some of its
-- connections: the endpoint is then at its cap.
local function flood(port)
  local out = files.tmpdir("flood") .. "/flood.log"
  -- descriptors enough for every connection, whatever the runner's limit
  local proc = helper.spawn({ "prlimit", "--nofile=" .. (IDLE + SLOW + 64), "--",
    "luajit", "tests/integration/support/flood.lua", port, IDLE, SLOW, 120 },
    { stdout = out, stderr = "stdout", pdeathsig = true })
  registry.procs[#registry.procs + 1] = proc
  helper.wait_until(function()
    local ok, text = pcall(helper.read_file, out)
    local closed = ok and tonumber(text:match("closed=(%d+)\n$"))
    return closed and closed > 0
  end, 30, "the flood at the endpoint's cap")
  local opened = tonumber(helper.read_file(out):match("^flood open=(%d+)"))
  assert.equal(IDLE + SLOW, opened, "connections the flood opened at once")
  return proc
end

-- Probes /healthz back to back for FLOOD_S, publishing a payment meanwhile;
-- then /readyz and /metrics once each. Every answer within PROBE_S.
local function probe_through(host, srv, port)
  local started, probes, slowest = helper.now(), 0, 0
  local published = false
  while helper.now() - started < FLOOD_S do
    local code, body, took = helper.probe(port, "/healthz", PROBE_S)
    probes = probes + 1
    assert(code == 200, string.format("probe %d: %s after %.3f s", probes, tostring(body), took))
    assert.equal("ok\n", body)
    slowest = math.max(slowest, took)
    sys.pause(PROBE_EVERY_MS) -- the probes' pace, not a wait for something
    if not published and helper.now() - started > 1 then
      helper.publish(srv, "payments", '{"id":"during-flood"}')
      published = true
    end
  end
  for _, path in ipairs { "/readyz", "/metrics" } do
    local code, body, took = helper.probe(port, path, PROBE_S)
    assert(code == 200, string.format("%s: %s after %.3f s", path, tostring(body), took))
  end
  host:wait_records({ msg = "payment posted", payment_id = "during-flood" }, 1, 10,
    "the payment published during the flood")
  helper.wait_until(function() return #srv:pending_ids("payments", "ledger") == 0 end, 10,
    "the payment acked")
  return probes, slowest
end

describe("the health endpoint under a flood of connections", function()
  after_each(helper.cleanup)

  it("answers every probe within 1 s and consumes, the open-file limit raised to the hard one", function()
    local srv = helper.redis_start()
    local host = helper.host_start({ "--http", "127.0.0.1:0" }, {
      server = srv, dir = helper.handlers_dir({ ["post.lua"] = POST }),
      wrap = { "prlimit", "--nofile=1024:8192", "--" },
    })
    local port = helper.health_port(host)
    host:wait_log(READY, 20, { plain = true })
    local flooding = flood(port)
    local probes = probe_through(host, srv, port)
    assert.truthy(probes >= 50, probes)
    assert.truthy(flooding:alive(), "the flood ran throughout")
    local raised = host:records({ msg = "open file limit raised" })[1]
    assert.truthy(raised, "the soft open-file limit raised")
    assert.equal("8192", raised.limit)
    assert.equal("1024", raised.from)
    assert.equal("1024", host:records({ msg = "health endpoint listening" })[1].max_connections)
    assert.equal(0, host:stop())
  end)

  it("answers every probe within 1 s and consumes under ulimit -n 1024", function()
    local srv = helper.redis_start({ appendonly = true })
    local host = helper.host_start({ "--http", "127.0.0.1:0" }, {
      server = srv, dir = helper.handlers_dir({ ["post.lua"] = POST }),
      wrap = { "sh", "-c", 'ulimit -n 1024 && exec "$@"', "sh" },
    })
    local port = helper.health_port(host)
    host:wait_log(READY, 20, { plain = true })
    local flooding = flood(port)
    local probes = probe_through(host, srv, port)
    assert.truthy(probes >= 50, probes)
    assert.truthy(flooding:alive(), "the flood ran throughout")
    -- a quarter of the 1024 descriptors at most: the rest stay for Redis
    assert.equal("1024", host:records({ msg = "open file limit" })[1].limit)
    assert.equal("256", host:records({ msg = "health endpoint listening" })[1].max_connections)
    -- Redis reconnects while the flood goes on
    srv:restart()
    helper.publish(srv, "payments", '{"id":"after-restart"}')
    host:wait_records({ msg = "payment posted", payment_id = "after-restart" }, 1, 30,
      "a payment after Redis restarted during the flood")
    local code, _, took = helper.probe(port, "/healthz", PROBE_S)
    assert(code == 200, string.format("/healthz after the restart: %.3f s", took))
    assert.equal(0, host:stop())
  end)
end)
