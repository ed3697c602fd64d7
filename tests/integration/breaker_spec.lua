-- The breaker against a real webhook's outage (issue 32): a server that
-- answers 503 with Retry-After: 5 for 60 s, then 200
-- (support/http_server.py's /outage), and a handler posting each entry to it
-- with ls.http, on two hosts. With ls.pause, every host pauses and one entry
-- probes until the webhook is back: no dead letter, each entry delivered
-- once, no delivery count above 2. With the usual retry (retry_after 1 s,
-- max_deliveries 5) the outage dead-letters the entries. The figures of both
-- are printed for docs/handlers.md's comparison.
--
-- LUASTREAM_OUTAGE_MS shortens the outage for a quick run by hand; the
-- figures in the docs are from the 60 s one.
local helper = require "tests.integration.helper"
local http_server = require "tests.integration.support.http_server"
local cjson = require "cjson"

local READY = 'msg="host ready"'
local OPENED = "breaker opened: the group pauses on every host"
local PAUSED = "subscription paused: no handler starts until it is resumed"
local CLOSED = "breaker closed: the probe succeeded, every host resumes"
local PROBE = "breaker half-open: this host runs one entry to probe"

local OUTAGE_MS = tonumber(os.getenv("LUASTREAM_OUTAGE_MS")) or 60000
local ENTRIES = 100
local WORKERS = 4

-- Posts each event, the delivery count it sees in X-Deliveries. ON_503 is
-- what it returns on a 503 or 429.
local HOOK = [[
local ls = require "luastream"
local URL = HOOK_URL

return {
  -- batch = workers: neither host reads the whole backlog, so both have
  -- entries to start, and both see the pause
  stream = "events", group = "hooks", start = "beginning", workers = WORKERS, batch = WORKERS,
  max_deliveries = 5, dead_letter = "events.dead",
  BREAKER
  handle = function(event, ctx)
    local res, err = ls.http.post(URL, {
      json = { n = event.n },
      headers = { ["Idempotency-Key"] = ctx.idempotency_key, ["X-Deliveries"] = ctx.deliveries },
      timeout = "5s",
    })
    if not res then error(err, 0) end
    ls.log.info("posted", { n = event.n, status = res.status, deliveries = ctx.deliveries })
    if res.status == 503 or res.status == 429 then
      return ON_503
    end
    return ls.ack()
  end,
}
]]

local WITH_BREAKER = {
  breaker = 'breaker = { max_pause = "10s" },', -- probes every 10 s at most: the run ends soon after the outage
  on_503 = 'ls.pause(res.retry_after or "5s", "webhook " .. res.status)',
}
local WITHOUT = { breaker = "", on_503 = 'ls.retry_after("1s")' }

local function hook_dir(url, how)
  local src = HOOK:gsub("HOOK_URL", string.format("%q", url)):gsub("WORKERS", tostring(WORKERS))
    :gsub("BREAKER", how.breaker):gsub("ON_503", how.on_503)
  return helper.handlers_dir({ ["hook.lua"] = src })
end

-- A webhook in its outage, a redis-server with ENTRIES events, two hosts.
local function start(how)
  local web = http_server.start()
  local srv = helper.redis_start()
  local dir = hook_dir(web.url .. "/outage?ms=" .. OUTAGE_MS .. "&retry_after=5", how)
  -- a name each: two hosts started at once both take the unnumbered one
  local hosts = {
    helper.host_start({ "--instance", "0" }, { server = srv, dir = dir }),
    helper.host_start({ "--instance", "1" }, { server = srv, dir = dir }),
  }
  for _, h in ipairs(hosts) do h:wait_log(READY, 20, { plain = true }) end
  local cmds = {}
  for i = 1, ENTRIES do cmds[i] = { "XADD", "events", "*", "data", cjson.encode({ n = i }) } end
  srv:pipe(cmds)
  return web, srv, hosts
end

-- The entries the webhook answered 200: {[n] = {deliveries seen, ...}}.
local function delivered(web)
  local by_n = {}
  for _, req in ipairs(web:requests()) do
    local n = cjson.decode(req.body).n
    by_n[n] = by_n[n] or {}
    table.insert(by_n[n], tonumber(req.headers["x-deliveries"]))
  end
  return by_n
end

local function count_keys(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n
end

local function records(hosts, filter)
  local all = {}
  for _, h in ipairs(hosts) do
    for _, r in ipairs(h:records(filter)) do all[#all + 1] = r end
  end
  return all
end

describe("a webhook's outage", function()
  after_each(helper.cleanup)

  it("with ls.pause: every host pauses, one entry probes, nothing is dead-lettered #slow", function()
    local web, srv, hosts = start(WITH_BREAKER)
    local t0 = helper.now()
    -- whichever host opened it first: trips=1
    helper.wait_until(function() return #records(hosts, { msg = OPENED, trips = "1" }) > 0 end, 30, "the breaker opened")
    local first = records(hosts, { msg = OPENED, trips = "1" })[1]
    assert.equal("webhook 503", first.reason)
    assert.equal("5000ms", first.pause, "Retry-After: 5 is the first pause")
    for i, h in ipairs(hosts) do -- each host holds, whichever tripped it
      h:wait_records({ msg = PAUSED, reason = "webhook 503" }, 1, 30, "host " .. i .. " paused")
    end

    helper.wait_until(function()
      return count_keys(delivered(web)) == ENTRIES and #srv:pending_ids("events", "hooks") == 0
    end, OUTAGE_MS / 1000 + 90, ENTRIES .. " events delivered and acked")
    local took = helper.now() - t0

    local by_n = delivered(web)
    local most = 0
    for n = 1, ENTRIES do
      most = math.max(most, (by_n[n][1] or 0) + 1)
      assert.equal(1, #by_n[n], "event " .. n .. " delivered once")
      assert.is_true(by_n[n][1] + 1 <= 2, "event " .. n .. " delivered with count " .. (by_n[n][1] + 1))
    end
    for _, r in ipairs(records(hosts, { msg = "posted" })) do
      assert.is_true(tonumber(r.deliveries) + 1 <= 2, "a delivery counted " .. (r.deliveries + 1) .. ": " .. r._line)
    end
    assert.equal(0, tonumber(srv:cli("XLEN", "events.dead")), "no dead letter")
    assert.is_true(#records(hosts, { msg = CLOSED }) >= 1, "the breaker closed")

    -- The webhook was asked only by what ran when each host tripped (at
    -- most a lane each) and by the probes: never once per entry.
    local refused = web:stats().refused
    local probes = #records(hosts, { msg = PROBE })
    assert.is_true(probes >= 1, "a probe ran")
    assert.is_true(refused <= #hosts * WORKERS + probes,
                   string.format("%d 503s for %d probes", refused, probes))
    io.stderr:write(string.format("\nbreaker: %d entries, a %d s outage: 0 dead letters, %d 503s answered "
      .. "(%d probes, %d trips), all delivered once %.0f s after the first post, delivery counts at most %d\n",
      ENTRIES, OUTAGE_MS / 1000, refused, probes, #records(hosts, { msg = OPENED }), took, most))
  end)

  it("without it: retry_after 1 s and max_deliveries 5 dead-letter the entries #slow", function()
    local web, srv, hosts = start(WITHOUT)
    local t0 = helper.now()
    local dead
    helper.wait_until(function()
      dead = tonumber(srv:cli("XLEN", "events.dead"))
      return dead + count_keys(delivered(web)) == ENTRIES
    end, OUTAGE_MS / 1000 + 90, "every event dead-lettered or delivered")
    local took = helper.now() - t0
    local refused = web:stats().refused
    -- 5 deliveries 1 s apart take a few seconds: far less than the outage
    assert.is_true(dead > ENTRIES / 2, dead .. " dead letters")
    assert.is_true(refused >= dead * 5, refused .. " 503s")
    assert.equal(0, #records(hosts, { msg = OPENED }))
    io.stderr:write(string.format("\nno breaker: %d entries, a %d s outage: %d dead letters %.0f s after the "
      .. "first post, %d 503s answered\n", ENTRIES, OUTAGE_MS / 1000, dead, took, refused))
  end)
end)
