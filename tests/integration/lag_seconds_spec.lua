-- Lag in seconds on a real redis-server (7.0 in the suite): a host's
-- luastream_group_lag_seconds and luastream_group_oldest_pending_seconds, and
-- `luastream status --json`'s lag_age_ms and oldest_pending_age_ms, against
-- ages computed by hand from entries published with explicit ids a known
-- number of ms behind the server's TIME: with a handler that never finishes,
-- after the next entry is deleted (XDEL), after the stream is trimmed, once
-- nothing waits, with an id ahead of the clock, with the oldest pending
-- entry's idle time reset (XCLAIM ... JUSTID to its own consumer), and with
-- an older entry on the group's retry stream.
local helper = require "tests.integration.helper"
local cjson = require "cjson"
local sys = require "tests.integration.support.sys"

local READY = 'msg="host ready"'

-- batch 1 and a handler that never finishes: the host holds the first
-- entry or two and reads no further.
local HANDLER = [[
local ls = require "luastream"
return { stream = "payments", group = "ledger", start = "beginning", batch = 1,
  handle = function() ls.sleep("1h") end }
]]

-- How far behind the server's clock each entry's id is, oldest first.
local BEHIND = { 60000, 50000, 40000, 30000, 20000, 10000 }
local RETRY_BEHIND = 90000

-- Metrics come from the asking before the scrape (group_stats.h), at most
-- about a second old: well under the 10 s between two entries.
local METRIC_SLACK_MS = 2500
local STATUS_SLACK_MS = 500

local function server_ms(srv)
  local t = assert(srv:call("TIME"))
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function ms_of(id) return tonumber(id:match("^(%d+)%-")) end

-- A gauge's value for stream "payments" and group "ledger" on a /metrics page.
local function gauge(page, name)
  for line in page:gmatch("[^\n]+") do
    local n, labels, v = line:match("^([%w_]+)(%b{}) (%S+)$")
    if n == name and labels:find('stream="payments"', 1, true)
        and labels:find('group="ledger"', 1, true) then
      return tonumber(v)
    end
  end
end

local function status_json(srv, dir)
  local _, out, err = helper.luastream("status", "--redis", srv.url, "--json", dir)
  local ok, doc = pcall(cjson.decode, out)
  assert(ok, "not JSON: " .. out .. err)
  assert.equal(1, #doc.groups, out)
  return doc.groups[1], out
end

describe("lag in seconds", function()
  after_each(helper.cleanup)

  it("follows the ids' ages by the server's clock, after XDEL, trimming and an idle reset", function()
    local srv = helper.redis_start()
    local base = server_ms(srv)
    local ids, cmds = {}, {}
    for i, behind in ipairs(BEHIND) do
      ids[i] = (base - behind) .. "-0"
      cmds[i] = { "XADD", "payments", ids[i], "data", '{"n":' .. i .. '}' }
    end
    srv:pipe(cmds)
    local dir = helper.handlers_dir({ ["stuck.lua"] = HANDLER })
    local host = helper.host_start({ "--http", "127.0.0.1:0", "--shutdown-timeout", "100ms" },
      { server = srv, dir = dir })
    host:wait_log(READY, 20, { plain = true })
    local port = helper.health_port(host)

    -- How far the host read: the entry at last-delivered-id and all before
    -- it are pending (the handler never finishes), nothing after it is.
    local delivered
    helper.wait_until(function()
      local g = srv:group("payments", "ledger")
      if not g or g.pending == 0 then return false end
      local before = g["last-delivered-id"]
      sys.pause(500) -- a read the host would make next has time to come
      g = srv:group("payments", "ledger")
      if g["last-delivered-id"] ~= before then return false end
      for i, id in ipairs(ids) do if id == before then delivered = i end end
      return delivered ~= nil
    end, 20, "the host to stop reading")
    assert.is_true(delivered <= 3, "read " .. delivered .. " entries with batch 1")
    local consumer = srv:call("XPENDING", "payments", "ledger", "-", "+", "1")[1][2]

    -- want(now) -> lag_ms, oldest_pending_ms, as computed by hand
    local function check(what, want)
      local lag, oldest, last_page
      local ok = pcall(helper.wait_until, function()
        local _, page = helper.http_get(port, "/metrics")
        last_page = page
        local now = server_ms(srv)
        local want_lag, want_oldest = want(now)
        lag = gauge(page, "luastream_group_lag_seconds")
        oldest = gauge(page, "luastream_group_oldest_pending_seconds")
        return lag and oldest and math.abs(lag * 1000 - want_lag) <= METRIC_SLACK_MS
          and math.abs(oldest * 1000 - want_oldest) <= METRIC_SLACK_MS
      end, 10, what)
      local want_lag, want_oldest = want(server_ms(srv))
      assert(ok, string.format("%s: metrics lag %s s, oldest pending %s s; by hand %.1f s and %.1f s\n%s",
        what, tostring(lag), tostring(oldest), want_lag / 1000, want_oldest / 1000, last_page or ""))
      -- status: the same ages, at the time it ran
      local before = server_ms(srv)
      local g, out = status_json(srv, dir)
      local after = server_ms(srv)
      local lag_lo, oldest_lo = want(before)
      local lag_hi, oldest_hi = want(after)
      local function within(v, lo, hi, name)
        assert(type(v) == "number" and v >= lo - STATUS_SLACK_MS and v <= hi + STATUS_SLACK_MS,
          string.format("%s: status %s = %s, by hand %d .. %d\n%s", what, name, tostring(v), lo, hi, out))
      end
      within(g.lag_age_ms, lag_lo, lag_hi, "lag_age_ms")
      within(g.oldest_pending_age_ms, oldest_lo, oldest_hi, "oldest_pending_age_ms")
      return g, out
    end

    local oldest_ms = ms_of(ids[1])
    local next_ms = ms_of(ids[delivered + 1])
    local g, out = check("the entry after the last delivered", function(now)
      return now - next_ms, now - oldest_ms
    end)
    assert.is_true(g.source.oldest_pending_age_ms >= BEHIND[1], out)
    assert.equal(g.lag_age_ms, g.source.lag_age_ms)
    assert.equal(0, g.retry.group_exists and g.retry.lag_age_ms or 0)

    -- The oldest pending entry's idle time reset: its age stays.
    assert.equal(ids[1], srv:call("XCLAIM", "payments", "ledger", consumer, "0", ids[1], "JUSTID")[1])
    check("an idle time reset by XCLAIM JUSTID", function(now) return now - next_ms, now - oldest_ms end)

    -- The next entry deleted: the one after it is next (XINFO's lag is nil).
    assert.equal(1, srv:call("XDEL", "payments", ids[delivered + 1]))
    next_ms = ms_of(ids[delivered + 2])
    check("after XDEL of the next entry", function(now) return now - next_ms, now - oldest_ms end)

    -- Trimmed up to the entry two after the last delivered: the pending
    -- entries go from the stream, not from the pending list.
    srv:call("XTRIM", "payments", "MINID", ids[delivered + 3])
    next_ms = ms_of(ids[delivered + 3])
    check("after XTRIM MINID", function(now) return now - next_ms, now - oldest_ms end)

    -- Nothing left to deliver: 0.
    srv:call("XTRIM", "payments", "MAXLEN", "0")
    check("with nothing to deliver", function(now) return 0, now - oldest_ms end)

    -- An id ahead of the server's clock: 0, never below.
    local ahead = (server_ms(srv) + 600000) .. "-0"
    srv:call("XADD", "payments", ahead, "data", "{}")
    g = check("with an id ahead of the clock", function(now) return 0, now - oldest_ms end)
    assert.equal(0, g.source.lag_age_ms)

    -- An older entry on the retry stream counts for the group: waiting
    -- there, or pending there if the host read it.
    local retry_id = (base - RETRY_BEHIND) .. "-0"
    srv:call("XADD", "payments:retry:ledger", retry_id, "data", "{}")
    local retry_ms = ms_of(retry_id)
    sys.pause(500) -- a read of the host's has time to take it, or not
    local rg = assert(srv:group("payments:retry:ledger", "ledger"), "the host made the group")
    if rg["last-delivered-id"] == retry_id then
      g = check("with an older entry pending on the retry stream", function(now) return 0, now - retry_ms end)
      assert.is_true(g.retry.oldest_pending_age_ms >= RETRY_BEHIND)
    else
      g = check("with an older entry waiting on the retry stream", function(now)
        return now - retry_ms, now - oldest_ms
      end)
      assert.is_true(g.retry.lag_age_ms >= RETRY_BEHIND)
      assert.equal(0, g.source.lag_age_ms)
    end

    -- The table shows both.
    local _, text = helper.luastream("status", "--redis", srv.url, dir)
    assert.matches("LAG AGE", text, 1, true)
    assert.matches("\npayments +ledger +%d+ +%S+ +%d+ +[%d.]+m?s +[%d.]+[smh] %(idle [%d.]+m?s%)", text)
    assert.equal(0, host:stop())
  end)
end)
