-- Least privilege: `luastream run` and the CLI commands work under exactly the
-- Redis ACL users docs/operations.md documents (the ACL SETUSER lines are read
-- from the document itself), and a user lacking one permission gets a log line
-- naming the command (or script) and the key Redis refused, with Redis's own
-- error text; periodic work that keeps failing makes /readyz answer 503.
local helper = require "tests.integration.helper"

local READY = 'msg="host ready"'
local PW = "acl-Pw-1234"

-- The ACL SETUSER lines of docs/operations.md, by user name.
local function documented()
  local users = {}
  for line in helper.read_file("docs/operations.md"):gmatch("[^\n]+") do
    local name = line:match("^ACL SETUSER (%S+) ")
    if name then users[name] = line end
  end
  return users
end

local function words(line)
  local out = {}
  for w in line:gmatch("%S+") do out[#out + 1] = w end
  return out
end

-- Runs an ACL SETUSER given as words, the password placeholder replaced.
local function setuser(srv, list)
  local args = {}
  for i, w in ipairs(list) do args[i] = w == ">PASSWORD" and ">" .. PW or w end
  assert.equal("OK", srv:cli(unpack(args)))
end

local function url_of(srv, user) return string.format("redis://%s:%s@127.0.0.1:%d", user, PW, srv.port) end

-- The documented `run` user for any handlers: the commands of the payments
-- example's line and the key patterns the table prescribes for each
-- handler (stream, group, and its write-only streams), minus `drop` (a
-- word to leave out).
local function run_user(name, subs, drop)
  local line = assert(documented()["payments-host"], "docs/operations.md has no payments-host line")
  local list = {}
  for _, w in ipairs(words(line)) do
    if not w:find("^~") and not w:find("^%%") then list[#list + 1] = w end
  end
  list[3] = name
  for _, s in ipairs(subs) do
    local S, G = s.stream, s.group
    for _, k in ipairs { "~" .. S, "~" .. S .. ":retry:" .. G, "~" .. S .. ":delayed:" .. G,
      "~" .. S .. ":delayed:" .. G .. ":unreadable", "~luastream:consumer:{" .. S .. "}:" .. G .. ":*",
      "~luastream:pause:{" .. S .. "}:" .. G } do
      list[#list + 1] = k
    end
    for _, w in ipairs(s.writes or {}) do list[#list + 1] = "%W~" .. w end
  end
  local out = {}
  for _, w in ipairs(list) do
    if w ~= drop then out[#out + 1] = w end
  end
  return out
end

-- Every action a handler can take, on a `new` subscription, and a claiming
-- one (the claim script before 8.4) that delays within min_idle (re-stamp).
-- min_idle leaves room for the default --watchdog plus a heartbeat, which
-- would be warned of (min_idle_margin.h) and the spec wants no warnings.
local POST = [[
local ls = require "luastream"

return {
  stream = "orders", group = "post", start = "beginning", reply_to = "orders.replies", dead_letter = "orders.dead",
  handle = function(order, ctx)
    local again = ctx.headers[ls.DELIVERY_COUNT_HEADER] ~= nil
    ls.log.info("order seen", { id = order.id, action = order.action, again = again })
    if order.action == "retry" and not again then return ls.retry() end
    if order.action == "delay" and not again then return ls.retry_after(300) end
    if order.action == "reply" then return ls.reply({ id = order.id }) end
    if order.action == "publish" then
      ctx:publish("orders.audit", { id = order.id })
      return ls.ack()
    end
    if order.action == "reject" then return ls.reject("refused by the spec") end
    ls.log.info("order done", { id = order.id, action = order.action })
    return ls.ack()
  end,
}
]]

local CHECK = [[
local ls = require "luastream"

return {
  stream = "orders", group = "check", start = "beginning", read = "claiming", claim_fallback = true, min_idle = 15000,
  handle = function(order, ctx)
    if order.action == "delay" and not ctx.headers[ls.DELIVERY_COUNT_HEADER] then
      return ls.retry_after(200)
    end
    ls.log.info("order checked", { id = order.id, action = order.action })
    return ls.ack()
  end,
}
]]

-- A claiming handler slow enough for the heartbeat to re-stamp its entries
-- and, stopped, to give back those waiting in its one lane.
local HOLD = [[
local ls = require "luastream"

return {
  stream = "orders", group = "hold", start = "beginning", read = "claiming", claim_fallback = true, min_idle = "2s",
  workers = 1,
  handle = function(order, ctx)
    ls.log.info("order held", { id = order.id })
    ls.sleep(2500)
    return ls.ack()
  end,
}
]]

local SUBS = {
  { stream = "orders", group = "post", writes = { "orders.replies", "orders.dead", "orders.audit" } },
  { stream = "orders", group = "check" },
}

-- Every order through a shared rate limiter, per action (ls.rate.take),
-- read under the group's own limits (the fields rate and rate_per_key).
local RATED = [[
local ls = require "luastream"

return {
  stream = "orders", group = "rated", start = "beginning", rate = "50/s", rate_per_key = "20/s",
  handle = function(order)
    ls.rate.take("orders-api", "100/s")
    ls.rate.take("orders-api", "100/s", order.action)
    ls.log.info("order rated", { id = order.id })
    return ls.ack()
  end,
}
]]

-- max_in_flight: the semaphore's script on every start and finish.
local CAPPED = [[
local ls = require "luastream"

return {
  stream = "orders", group = "capped", start = "beginning", workers = 4, max_in_flight = 2,
  handle = function(order)
    ls.sleep(50)
    ls.log.info("order capped", { id = order.id })
    return ls.ack()
  end,
}
]]

local ACTIONS = { "ack", "retry", "delay", "reply", "publish", "reject" }

local function publish_orders(srv)
  for i, action in ipairs(ACTIONS) do
    srv:cli("XADD", "orders", "*", "data", string.format('{"id":%d,"action":"%s"}', i, action))
  end
end

local function start(srv, user, files, args)
  return helper.host_start(args or {}, {
    url = false, env = { REDIS_URL = url_of(srv, user) }, dir = helper.handlers_dir(files),
  })
end

-- Log records at warn or error level.
local function complaints(host)
  return host:records(function(r)
    return (r.level == "warn" or r.level == "error") and r.msg ~= "entry dead-lettered" -- the reject
  end)
end

local function assert_quiet(host)
  local bad = complaints(host)
  assert(#bad == 0, "warnings or errors in the log:\n" .. table.concat((function()
    local t = {}
    for i, r in ipairs(bad) do t[i] = r._line end
    return t
  end)(), "\n"))
end

local function assert_nothing_pending(srv, stream, group)
  assert.same({}, (srv:pending_ids(stream, group)))
  assert.same({}, (srv:pending_ids(stream .. ":retry:" .. group, group)))
end

-- The first record matching filter, waited for.
local function wait_one(host, filter, what)
  return host:wait_records(filter, 1, 20, what)[1]
end

describe("the documented Redis ACL", function()
  after_each(helper.cleanup)

  it("runs the payments example (handlers/before-8.4) and the producer under their documented users", function()
    local srv = helper.redis_start()
    local users = documented()
    setuser(srv, words(assert(users["payments-host"])))
    setuser(srv, words(assert(users["payments-producer"])))
    local host = helper.host_start({ "--http", "127.0.0.1:0" }, {
      url = false, env = { REDIS_URL = url_of(srv, "payments-host") }, dir = "handlers/before-8.4",
    })
    host:wait_log(READY, 20, { plain = true })
    for i = 1, 5 do
      local code, out, err = helper.luastream("publish", "payments",
        string.format('{"id":%d,"account":"acme","amount_cents":%d}', i, i * 600000), "--key", "acme",
        { env = { REDIS_URL = url_of(srv, "payments-producer") } })
      assert.equal(0, code, out .. err)
    end
    helper.wait_until(function() return srv:xlen("payments.screened") == 5 end, 20, "5 replies")
    host:wait_records({ msg = "payment posted" }, 5, 20, "5 payments posted")
    -- the lease is renewed (every 5 s) under the same user
    local key = srv:cli("KEYS", "luastream:consumer:{payments}:ledger:*"):match("[^\n]+")
    local expiry = tonumber(srv:cli("PEXPIRETIME", key))
    helper.wait_until(function() return tonumber(srv:cli("PEXPIRETIME", key)) > expiry end, 10, "a lease renewal")
    assert_nothing_pending(srv, "payments", "ledger")
    assert_nothing_pending(srv, "payments", "fraud")
    -- the lag in seconds (a script with TIME, XRANGE, XPENDING) is read:
    -- its series exist only once the script has answered
    local port = helper.health_port(host)
    helper.wait_until(function()
      local _, page = helper.http_get(port, "/metrics")
      return page:find('\nluastream_group_lag_seconds{stream="payments",group="ledger"} 0\n', 1, true)
        and page:find('\nluastream_group_oldest_pending_seconds{stream="payments",group="fraud"} 0\n', 1, true)
    end, 10, "the lag in seconds under the run user")
    -- status reads all it needs, the consumers' leases and the server's time included
    setuser(srv, words(assert(users["payments-status"])))
    local code, out, err = helper.luastream("status", "--json", "handlers/before-8.4",
      { env = { REDIS_URL = url_of(srv, "payments-status") } })
    assert.equal(0, code, out .. err)
    for _, g in ipairs(require("cjson").decode(out).groups) do
      assert.equal(0, g.lag_age_ms, out)
      assert.equal(0, g.oldest_pending_age_ms, out)
    end
    code, out, err = helper.luastream("status", "handlers/before-8.4",
      { env = { REDIS_URL = url_of(srv, "payments-status") } })
    assert.equal(0, code, out .. err)
    assert.matches("nothing needs attention", out, 1, true)
    local _, leases = out:gsub("%d+%.?%d*m?s ago\n", "")
    assert.is_true(leases >= 2, out) -- ledger's and fraud's consumers at least: each lease renewed
    assert.is_nil(out:find(" none\n", 1, true), out)
    assert.equal(0, host:stop())
    assert_quiet(host)
    assert.equal("", srv:cli("KEYS", "luastream:consumer:*"), "the leases are given back")

    -- the producer may write the source stream and nothing else
    code, out, err = helper.luastream("publish", "payments:retry:ledger", '{"id":9}',
      { env = { REDIS_URL = url_of(srv, "payments-producer") } })
    assert.equal(1, code, out .. err)
    assert.matches("XADD payments:retry:ledger", err, 1, true)
    assert.matches("NOPERM", err, 1, true)
    local denied = srv:call("ACL", "DRYRUN", "payments-producer", "XRANGE", "payments", "-", "+")
    assert.matches("no permissions", denied)
  end)

  -- The keys a process reads to number its names (the leases, with GET) and
  -- renews together (one script call): all in the documented patterns.
  it("numbers a second process's names and renews its leases under the documented run user", function()
    local srv = helper.redis_start()
    local users = documented()
    setuser(srv, words(assert(users["payments-host"])))
    local env = { REDIS_URL = url_of(srv, "payments-host") }
    local a = helper.host_start({}, { url = false, env = env, dir = "handlers/before-8.4" })
    a:wait_log(READY, 20, { plain = true })
    local b = helper.host_start({}, { url = false, env = env, dir = "handlers/before-8.4" })
    b:wait_log(READY, 10, { plain = true })
    local numbered = b:records({ msg = "consumer names numbered: a live process on this machine holds the names before" })
    assert.equal(1, #numbered, b:log())
    assert.equal("1", numbered[1].instance)
    assert.equal(0, b:count({ msg = "cannot look for free consumer names: using the first" }))
    -- both processes' leases, renewed (every 5 s) under the same user
    local keys = {}
    for k in srv:cli("KEYS", "luastream:consumer:{payments}:*"):gmatch("[^\n]+") do keys[#keys + 1] = k end
    assert.is_true(#keys >= 4, table.concat(keys, " "))
    -- the expiry's time, not PTTL: a reading taken d ms after the take is
    -- exceeded by the time left after a renewal only for d ms, too short to poll
    local expiry = {}
    for i, k in ipairs(keys) do expiry[i] = tonumber(srv:cli("PEXPIRETIME", k)) end
    helper.wait_until(function()
      for i, k in ipairs(keys) do
        if tonumber(srv:cli("PEXPIRETIME", k)) <= expiry[i] then return false, k end
      end
      return true
    end, 10, "every lease renewed")
    assert.equal(0, b:count({ msg = "the consumer lease failed, retrying" }))
    assert.equal(0, a:count({ msg = "the consumer lease failed, retrying" }))
    assert.equal(0, b:stop())
    assert.equal(0, a:stop())
    assert_quiet(a)
    assert_quiet(b)
  end)

  it("runs every outcome (ack, retry, delay, reply, publish, reject, claim, re-stamp) under the documented run user", function()
    local srv = helper.redis_start()
    setuser(srv, run_user("orders-host", SUBS))
    publish_orders(srv)
    local host = start(srv, "orders-host", { ["post.lua"] = POST, ["check.lua"] = CHECK })
    host:wait_log(READY, 20, { plain = true })
    host:wait_records({ msg = "order done" }, 3, 20, "ack, retry and delay done") -- ack, retry, delay
    host:wait_records({ msg = "order checked" }, 6, 20, "every order checked")
    helper.wait_until(function()
      return srv:xlen("orders.replies") == 1 and srv:xlen("orders.audit") == 1 and srv:xlen("orders.dead") == 1
    end, 20, "the reply, the published entry and the dead letter")
    helper.wait_until(function()
      return #srv:pending_ids("orders", "post") == 0 and #srv:pending_ids("orders:retry:post", "post") == 0
        and #srv:pending_ids("orders", "check") == 0
    end, 20, "nothing pending")
    assert.equal("0", srv:cli("ZCARD", "orders:delayed:post"))
    -- a lease renewal (every 5 s) under this user
    local key = "luastream:consumer:{orders}:post:" .. srv:cli("XINFO", "CONSUMERS", "orders", "post"):match("name\n([^\n]+)")
    local expiry = tonumber(srv:cli("PEXPIRETIME", key))
    helper.wait_until(function() return tonumber(srv:cli("PEXPIRETIME", key)) > expiry end, 10, "a lease renewal")
    assert_nothing_pending(srv, "orders", "post")
    assert_nothing_pending(srv, "orders", "check")
    assert.equal(0, host:stop())
    assert_quiet(host)
  end)

  it("pauses and resumes under the documented pause user, seen by the run user and shown to the status user", function()
    local srv = helper.redis_start()
    local users = documented()
    setuser(srv, words(assert(users["payments-pause"], "docs/operations.md has no payments-pause line")))
    setuser(srv, words(assert(users["payments-status"], "docs/operations.md has no payments-status line")))
    setuser(srv, run_user("payments-runner", { { stream = "payments", group = "ledger" } }))
    local host = start(srv, "payments-runner", { ["post.lua"] = [[
local ls = require "luastream"
return { stream = "payments", group = "ledger", start = "beginning",
  handle = function(p) ls.log.info("payment posted", { id = p.id }) end }
]] })
    host:wait_log(READY, 20, { plain = true })
    srv:cli("XADD", "payments", "*", "data", '{"id":1}')
    wait_one(host, { msg = "payment posted", id = "1" }, "the first payment")
    assert.equal("OK", srv:cli("ACL", "LOG", "RESET"))

    local code, out, err = helper.luastream("pause", "--redis", url_of(srv, "payments-pause"), "payments", "ledger",
      "--reason", "acl spec")
    assert.equal(0, code, out .. err)
    -- the host looks at it (an entry asks to start) and says so
    srv:cli("XADD", "payments", "*", "data", '{"id":2}')
    wait_one(host, { msg = "subscription paused: no handler starts until it is resumed" }, "the host seeing the pause")
    srv:cli("XADD", "payments", "*", "data", '{"id":3}')
    code, out, err = helper.luastream("status", "--redis", url_of(srv, "payments-status"), "payments")
    assert.equal(0, code, out .. err)
    assert.truthy(out:find("payments ledger: paused by luastream pause by ", 1, true), out)
    assert.is_nil(out:find("cannot read", 1, true), out)
    code, out, err = helper.luastream("resume", "--redis", url_of(srv, "payments-pause"), "payments", "ledger")
    assert.equal(0, code, out .. err)
    assert.truthy(out:find(": acl spec)", 1, true), out)
    wait_one(host, { msg = "payment posted", id = "3" }, "the payment added while paused, after resume")
    local refused = {}
    for _, e in ipairs(srv:call("ACL", "LOG")) do
      if e.object ~= "info" then refused[#refused + 1] = e end -- INFO cluster: see the recipes' note
    end
    assert.same({}, refused, "pause, resume, status or the host's look was refused something")
    assert.equal(0, host:stop())
    for _, r in ipairs(complaints(host)) do
      assert.equal("subscription paused: no handler starts until it is resumed", r.msg, r._line)
    end
  end)

  it("runs as if never paused when the run user may not read the pause, saying so once", function()
    local srv = helper.redis_start()
    setuser(srv, run_user("payments-runner", { { stream = "payments", group = "ledger" } },
      "~luastream:pause:{payments}:ledger"))
    srv:cli("HSET", "luastream:pause:{payments}:ledger", "kind", "manual", "reason", "x", "by", "y", "since_ms", "1")
    local host = start(srv, "payments-runner", { ["post.lua"] = [[
local ls = require "luastream"
return { stream = "payments", group = "ledger", start = "beginning",
  handle = function(p) ls.log.info("payment posted", { id = p.id }) end }
]] })
    host:wait_log(READY, 20, { plain = true })
    for i = 1, 3 do srv:cli("XADD", "payments", "*", "data", '{"id":' .. i .. "}") end
    host:wait_records({ msg = "payment posted" }, 3, 20, "every payment, though paused")
    local recs = host:records({ msg = "the redis user may not read the group's pause: the subscription runs as if "
      .. "never paused (allow the key in the ACL: see docs/operations.md)" })
    assert.equal(1, #recs)
    assert.equal("luastream:pause:{payments}:ledger", recs[1].key)
    assert.equal(0, host:stop())
  end)

  it("takes ls.rate and rate field permits under the documented run user with the group's and the name's patterns", function()
    local srv = helper.redis_start()
    local list = run_user("orders-host", { { stream = "orders", group = "rated" } })
    list[#list + 1] = "~luastream:rate:{orders}:rated*" -- rate, and rate_per_key's keys
    list[#list + 1] = "~luastream:limit:{orders-api}*" -- ls.rate.take's name, and its keys
    setuser(srv, list)
    publish_orders(srv)
    for i = 1, 2 do -- per key too
      srv:cli("XADD", "orders", "*", "data", '{"id":' .. (#ACTIONS + i) .. ',"action":"ack"}', "partition-key", "acme")
    end
    local host = start(srv, "orders-host", { ["rated.lua"] = RATED })
    host:wait_log(READY, 20, { plain = true })
    host:wait_records({ msg = "order rated" }, #ACTIONS + 2, 20, "every order through the limiter")
    helper.wait_until(function() return #srv:pending_ids("orders", "rated") == 0 end, 20, "nothing pending")
    assert.equal(0, host:stop())
    assert_quiet(host)
  end)

  it("runs a scheduled handler under the documented run user with +hdel +hincrby ~luastream:tick:{NAME}", function()
    local srv = helper.redis_start()
    local list = run_user("ticker-host", {}) -- no stream: only the schedule's hash
    for _, w in ipairs { "+hdel", "+hincrby", "+rpush", "~luastream:tick:{nightly}", "~ticks" } do
      list[#list + 1] = w
    end
    setuser(srv, list)
    local host = start(srv, "ticker-host", { ["nightly.lua"] = [[
return {
  every = "1s",
  tick = function(ctx) ctx:write("RPUSH", "ticks", tostring(ctx.tick)) end,
}
]] })
    host:wait_log(READY, 20, { plain = true })
    helper.wait_until(function() return tonumber(srv:cli("LLEN", "ticks")) >= 2 end, 20, "two ticks")
    assert.equal("ok", srv:cli("HGET", "luastream:tick:{nightly}", "last_outcome"))
    assert.equal(0, host:stop())
    assert_quiet(host)
  end)

  it("runs a max_in_flight handler under the documented run user with ~luastream:inflight:{S}:G*", function()
    local srv = helper.redis_start()
    local list = run_user("orders-host", { { stream = "orders", group = "capped" } })
    list[#list + 1] = "~luastream:inflight:{orders}:capped*"
    setuser(srv, list)
    publish_orders(srv)
    local host = start(srv, "orders-host", { ["capped.lua"] = CAPPED })
    host:wait_log(READY, 20, { plain = true })
    host:wait_records({ msg = "order capped" }, #ACTIONS, 20, "every order through the semaphore")
    helper.wait_until(function() return #srv:pending_ids("orders", "capped") == 0 end, 20, "nothing pending")
    assert.equal(0, host:stop())
    assert_quiet(host)
  end)

  it("runs a max_in_flight_per_key handler under the documented run user with ~luastream:inflight:{S}:G*", function()
    local srv = helper.redis_start()
    local list = run_user("orders-host", { { stream = "orders", group = "capped" } })
    list[#list + 1] = "~luastream:inflight:{orders}:capped*"
    setuser(srv, list)
    for i = 1, 6 do
      srv:cli("XADD", "orders", "*", "data", string.format('{"id":%d}', i), "partition-key", "account-" .. (i % 2))
    end
    local per_key = CAPPED:gsub("max_in_flight = 2", "max_in_flight_per_key = 1")
    local host = start(srv, "orders-host", { ["capped.lua"] = per_key })
    host:wait_log(READY, 20, { plain = true })
    host:wait_records({ msg = "order capped" }, 6, 20, "every order through its key's slots")
    helper.wait_until(function() return #srv:pending_ids("orders", "capped") == 0 end, 20, "nothing pending")
    assert.equal(0, host:stop())
    assert_quiet(host)
  end)

  it("says which key a max_in_flight handler lacks when the run user has no ~luastream:inflight:*", function()
    local srv = helper.redis_start()
    setuser(srv, run_user("orders-host", { { stream = "orders", group = "capped" } }))
    publish_orders(srv)
    local host = start(srv, "orders-host", { ["capped.lua"] = CAPPED })
    host:wait_log(READY, 20, { plain = true })
    local rec = host:wait_records({ msg = "max_in_flight: the slots call failed, entries wait" }, 1, 20,
      "the refusal logged")[1]
    assert.equal("warn", rec.level)
    assert.equal("luastream:inflight:{orders}:capped", rec.key)
    assert.matches("no permissions", rec.error)
    assert.equal(0, host:count({ msg = "order capped" }), "nothing starts without a slot")
    host:stop()
  end)

  it("keeps the claim on held entries and gives back unstarted ones under the documented run user #slow", function()
    local srv = helper.redis_start()
    setuser(srv, run_user("orders-host", { { stream = "orders", group = "hold" } }))
    publish_orders(srv)
    local host = start(srv, "orders-host", { ["hold.lua"] = HOLD }, { "--watchdog", "1s" })
    host:wait_log(READY, 20, { plain = true })
    -- The second order starts 2.5 s after the read: the four behind it,
    -- never started, have been re-stamped (idle below min_idle) all along.
    wait_one(host, { msg = "order held", id = "2" }, "the second order started")
    local _, pending = srv:pending_ids("orders", "hold")
    local waiting = 0
    for _, p in pairs(pending) do
      assert(p[3] < 2000, "entry " .. p[1] .. " idle " .. p[3] .. " ms: not re-stamped")
      waiting = waiting + 1
    end
    assert.equal(5, waiting)
    assert.equal(0, host:stop())
    assert.equal(1, #host:records({ msg = "entries read but not started given back", entries = "4" }))
    local _, back = srv:pending_ids("orders", "hold")
    local given = 0
    for _, p in pairs(back) do
      assert.equal(0, p[4], "entry " .. p[1] .. " delivery count")
      given = given + 1
    end
    assert.equal(4, given)
    assert_quiet(host)
  end)

  it("lists, replays and deletes dead letters under the documented users", function()
    local srv = helper.redis_start()
    local users = documented()
    setuser(srv, words(assert(users["payments-dead-letters-list"])))
    setuser(srv, words(assert(users["payments-dead-letters-replay"])))
    setuser(srv, words(assert(users["payments-dead-letters-delete"])))
    -- the ledger's and the fraud group's handlers both dead-letter to payments.dead
    local handler = [[return { stream = "payments", group = "%s", dead_letter = "payments.dead", handle = function() end }]]
    local dir = helper.handlers_dir({ ["post.lua"] = handler:format("ledger"), ["screen.lua"] = handler:format("fraud") })
    srv:cli("XADD", "payments.dead", "*", "data", '{"id":1}', "dead-letter-stream", "payments",
      "dead-letter-group", "ledger", "dead-letter-id", "1-0", "dead-letter-reason", "rejected")
    local code, out, err = helper.luastream("dead-letters", "list", "payments.dead",
      { env = { REDIS_URL = url_of(srv, "payments-dead-letters-list") } })
    assert.equal(0, code, out .. err)
    assert.matches("1 dead letter on payments.dead", out, 1, true)
    code, out, err = helper.luastream("dead-letters", "replay", dir, "payments.dead", "--all",
      { env = { REDIS_URL = url_of(srv, "payments-dead-letters-replay") } })
    assert.equal(0, code, out .. err)
    assert.matches("replayed 1 dead letter from payments.dead", out, 1, true)
    assert.equal(1, srv:xlen("payments:retry:ledger"))
    assert.equal(0, srv:xlen("payments.dead"))

    -- the list user cannot replay; the replay user cannot reach another group
    code, out, err = helper.luastream("dead-letters", "replay", dir, "payments.dead", "--all",
      { env = { REDIS_URL = url_of(srv, "payments-dead-letters-list") } })
    assert.equal(1, code, out .. err)
    srv:cli("XADD", "payments.dead", "*", "data", '{"id":2}', "dead-letter-stream", "payments",
      "dead-letter-group", "fraud", "dead-letter-id", "2-0", "dead-letter-reason", "rejected")
    code, out, err = helper.luastream("dead-letters", "replay", dir, "payments.dead", "--all",
      { env = { REDIS_URL = url_of(srv, "payments-dead-letters-replay") } })
    assert.equal(1, code, out .. err)
    assert.matches("the replay script", err, 1, true)
    assert.matches("payments.dead", err, 1, true)
    assert.matches("can't access", err, 1, true)
    assert.matches("(TYPE payments:retry:fraud of dead letter", err, 1, true)
    assert.equal(1, srv:xlen("payments.dead"), "nothing moved")

    -- the delete user deletes; the list user cannot
    code, out, err = helper.luastream("dead-letters", "delete", "payments.dead", "--all", "--yes",
      { env = { REDIS_URL = url_of(srv, "payments-dead-letters-list") } })
    assert.equal(1, code, out .. err)
    assert.equal(1, srv:xlen("payments.dead"))
    code, out, err = helper.luastream("dead-letters", "delete", "payments.dead", "--reason", "rejected", "--yes",
      { env = { REDIS_URL = url_of(srv, "payments-dead-letters-delete") } })
    assert.equal(0, code, out .. err)
    assert.matches("deleted 1 dead letter of reason rejected from payments.dead", out, 1, true)
    assert.equal(0, srv:xlen("payments.dead"))
  end)

  it("shows the console under its documented read-only user; replays and deletes under the actions user", function()
    local console = require "tests.integration.support.console"
    local cjson = require "cjson"
    local srv = helper.redis_start()
    local users = documented()
    setuser(srv, words(assert(users["payments-console"], "docs/operations.md has no payments-console line")))
    setuser(srv, words(assert(users["payments-console-actions"], "docs/operations.md has no payments-console-actions line")))
    local dir = helper.handlers_dir({
      ["post.lua"] = [[return { stream = "payments", group = "ledger", dead_letter = "payments.dead", handle = function() end }]],
    })
    for i = 1, 3 do srv:cli("XADD", "payments", "*", "data", '{"id":' .. i .. "}") end
    srv:cli("XGROUP", "CREATE", "payments", "ledger", "0")
    srv:cli("XREADGROUP", "GROUP", "ledger", "web-1", "COUNT", "2", "STREAMS", "payments", ">")
    local dead = {}
    for i = 1, 2 do
      dead[i] = srv:cli("XADD", "payments.dead", "*", "data", '{"id":' .. i .. "}", "dead-letter-stream", "payments",
        "dead-letter-group", "ledger", "dead-letter-id", i .. "-0", "dead-letter-reason", "rejected")
    end
    assert.equal("OK", srv:cli("ACL", "LOG", "RESET"))

    -- every page under the read-only user, and not one denial
    local h = console.start({ command = "console", url = false, dir = dir,
      env = { REDIS_URL = url_of(srv, "payments-console") } })
    local c = console.client(h.port, { bearer = console.ALICE })
    local doc = c:json("/api/overview")
    local g = doc.groups[1]
    assert.equal("payments", g.stream, cjson.encode(doc))
    assert.equal(3, g.source.length)
    assert.equal(1, g.source.lag)
    assert.equal(2, g.source.pending)
    assert.equal(cjson.null, g.source.error)
    assert.equal(2, g.consumers[1].pending)
    assert.equal(2, g.dead_letter.length)
    assert.equal(2, #c:json("/api/pending?key=payments&group=ledger").entries)
    assert.equal(0, #c:json("/api/pending?key=payments:retry:ledger&group=ledger").entries)
    assert.is_true(c:json("/api/entry?key=payments.dead&id=" .. dead[1]).found)
    assert.equal(2, #c:json("/api/dead-letters?stream=payments.dead").entries)
    assert.same({ dead[1] }, c:post_json("/api/dead-letters/preview", { { "action", "replay" },
      { "stream", "payments.dead" }, { "id", dead[1] } }).ids)
    assert.same({}, srv:call("ACL", "LOG"), "the read-only console was refused something")
    -- its actions are refused, and change nothing
    local res = c:post_json("/api/dead-letters/replay", { { "stream", "payments.dead" }, { "id", dead[1] } })
    assert.matches("NOPERM", res.error)
    res = c:post_json("/api/dead-letters/delete", { { "stream", "payments.dead" }, { "id", dead[2] } })
    assert.matches("NOPERM", res.error)
    assert.equal(0, res.deleted)
    assert.equal(2, srv:xlen("payments.dead"))
    res = c:post("/api/pause", { { "stream", "payments" }, { "group", "ledger" } })
    assert.equal(502, res.status)
    assert.matches("NOPERM", res.json.error)
    assert.equal(0, srv:call("EXISTS", "luastream:pause:{payments}:ledger"))
    assert.equal(0, h:stop())

    -- the actions user replays and deletes, and shows all the same
    assert.equal("OK", srv:cli("ACL", "LOG", "RESET"))
    h = console.start({ command = "console", url = false, dir = dir,
      env = { REDIS_URL = url_of(srv, "payments-console-actions") } })
    c = console.client(h.port, { bearer = console.ALICE })
    assert.equal(2, c:json("/api/overview").groups[1].source.pending)
    assert.equal(2, #c:json("/api/dead-letters?stream=payments.dead").entries)
    res = c:post_json("/api/dead-letters/replay", { { "stream", "payments.dead" }, { "id", dead[1] } })
    assert.is_nil(res.error, cjson.encode(res))
    assert.equal("payments:retry:ledger", res.replayed[1].to)
    assert.equal(1, srv:xlen("payments:retry:ledger"))
    assert.equal(1, c:post_json("/api/dead-letters/delete", { { "stream", "payments.dead" }, { "id", dead[2] } }).deleted)
    assert.equal(0, srv:xlen("payments.dead"))
    assert.is_true(c:post_json("/api/pause", { { "stream", "payments" }, { "group", "ledger" }, { "for", "1m" },
      { "reason", "acl" } }).paused)
    assert.equal("paused", c:json("/api/overview").groups[1].pause.state)
    assert.is_true(c:post_json("/api/resume", { { "stream", "payments" }, { "group", "ledger" } }).was_paused)
    assert.same({}, srv:call("ACL", "LOG"), "the console's actions were refused something")
    assert.equal(0, h:stop())
  end)

  it("keeps producers off dead-letter streams and retry streams", function()
    local srv = helper.redis_start()
    setuser(srv, words(assert(documented()["payments-producer"], "docs/operations.md has no payments-producer line")))
    local url = url_of(srv, "payments-producer")
    local code, out, err = helper.luastream("publish", "payments", '{"id":1}', { env = { REDIS_URL = url } })
    assert.equal(0, code, out .. err)
    -- --wait needs +wait, as the recipe says: without it the entry is added and WAIT refused, exit 3
    code, out, err = helper.luastream("publish", "payments", '{"id":1}', "--wait", "1,100ms", { env = { REDIS_URL = url } })
    assert.equal(3, code, out .. err)
    assert.matches("WAIT on redis://payments-producer:***@127.0.0.1:" .. srv.port .. " failed: NOPERM", err, 1, true)
    assert.matches("entry " .. helper.trim(out) .. " was added", err, 1, true)
    assert.equal(2, srv:xlen("payments"))
    -- an entry on the dead-letter stream (a forged dead letter), a retry copy: each refused
    for _, stream in ipairs { "payments.dead", "payments:retry:ledger" } do
      code, out, err = helper.luastream("publish", stream, '{"id":2}', { env = { REDIS_URL = url } })
      assert.equal(1, code, out .. err)
      assert.matches("XADD " .. stream, err, 1, true)
      assert.matches("NOPERM", err, 1, true)
      assert.equal(0, srv:xlen(stream))
    end
    assert.equal(0, srv:xlen("payments.dead"))
  end)
end)

describe("a refused command", function()
  after_each(helper.cleanup)

  -- Starts a host under the run user without `drop`, publishes the orders.
  local function lacking(drop, args)
    local srv = helper.redis_start()
    setuser(srv, run_user("orders-host", SUBS, drop))
    local host = start(srv, "orders-host", { ["post.lua"] = POST }, args)
    return srv, host
  end

  it("in an outcome's transaction names the command and key, not EXECABORT", function()
    local srv, host = lacking("%W~orders.replies")
    host:wait_log(READY, 20, { plain = true })
    publish_orders(srv)
    local rec = wait_one(host, { msg = "outcome not written, entry left pending", outcome = "reply" }, "the refused reply")
    assert.equal("XADD", rec.command)
    assert.equal("orders.replies", rec.key)
    assert.matches("^NOPERM", rec.error)
    assert.is_nil(rec.error:find("EXECABORT", 1, true), rec._line)
    -- the other outcomes went through
    host:wait_records({ msg = "order done" }, 3, 20)
    assert.equal(0, host:stop())
  end)

  it("in the delay set: the transaction's ZADD and the sweep script, with their keys", function()
    local srv, host = lacking("~orders:delayed:post")
    host:wait_log(READY, 20, { plain = true })
    publish_orders(srv)
    local rec = wait_one(host, { msg = "outcome not written, entry left pending", outcome = "retry_after" }, "the refused delay")
    assert.equal("ZADD", rec.command)
    assert.equal("orders:delayed:post", rec.key)
    assert.matches("^NOPERM", rec.error)
    rec = wait_one(host, { msg = "the delay-set sweep failed, retrying" }, "the refused sweep")
    assert.equal("EVAL", rec.command)
    assert.equal("the delay-set sweep", rec.script)
    assert.equal("orders:delayed:post orders:retry:post orders:delayed:post:unreadable", rec.keys)
    assert.matches("^NOPERM", rec.error) -- EVAL refused: its KEYS are checked first
    assert.equal(0, host:stop())
  end)

  it("on a dead letter, a retry copy and an ack: command and key", function()
    local srv, host = lacking("%W~orders.dead")
    host:wait_log(READY, 20, { plain = true })
    publish_orders(srv)
    local rec = wait_one(host, { msg = "outcome not written, entry left pending", outcome = "dead letter" })
    assert.equal("XADD", rec.command)
    assert.equal("orders.dead", rec.key)
    assert.equal(0, host:stop())
    helper.cleanup()

    srv, host = lacking("+xack", { "--shutdown-timeout", "500ms" }) -- the acks never drain
    host:wait_log(READY, 20, { plain = true })
    publish_orders(srv)
    rec = wait_one(host, { msg = "ack failed, will retry" })
    assert.equal("XACK", rec.command)
    assert.equal("orders", rec.key)
    assert.matches("^NOPERM", rec.error)
    rec = wait_one(host, { msg = "outcome not written, entry left pending", outcome = "retry" })
    assert.equal("XACK", rec.command) -- the retry copy's transaction acks too
    assert.equal("orders", rec.key)
    assert.equal(0, host:stop())
  end)

  it("at start-up, on the retry stream and the consumer lease: not starting, naming command or script, and key", function()
    local _, host = lacking("~orders:retry:post")
    local rec = wait_one(host, { msg = "cannot create the group on the retry stream, retrying" })
    assert.equal("XGROUP CREATE", rec.command)
    assert.equal("orders:retry:post", rec.key)
    assert.matches("^NOPERM", rec.error)
    -- a missing right at start-up is fatal: waiting cannot help
    assert.equal(1, host:wait_exit(10))
    assert.truthy(host:log():find("cannot start: .* refused .*post%.lua: permission denied: XGROUP CREATE "
      .. "on orders:retry:post: NOPERM"), host:log())
    assert.equal(1, host:count({ msg = "redis refused luastream: not starting" }))
    helper.cleanup()

    _, host = lacking("~luastream:consumer:{orders}:post:*")
    rec = wait_one(host, { msg = "the consumer lease failed, retrying" })
    assert.equal("EVAL", rec.command)
    assert.equal("the consumer lease", rec.script)
    assert.matches("^luastream:consumer:{orders}:post:", rec.key)
    assert.matches("^NOPERM", rec.error) -- EVAL refused: its KEYS are checked first
    assert.equal(1, host:wait_exit(10))
    assert.truthy(host:log():find("permission denied: EVAL (the consumer lease) on luastream:consumer:{orders}:post:",
      1, true), host:log())
  end)

  it("in the idle-consumer prune: script and key", function()
    local _, host = lacking("+xinfo|consumers")
    local rec = wait_one(host, { msg = "removing idle consumers failed, retrying" })
    assert.equal("EVAL", rec.command)
    assert.equal("the idle-consumer prune", rec.script)
    assert.equal("orders", rec.key)
    assert.matches("can't run this command", rec.error, 1, true)
    assert.equal(0, host:stop())
  end)
end)

describe("/readyz and periodic work", function()
  after_each(helper.cleanup)

  it("is 503 while the delay-set sweep keeps failing, naming it, and 200 once it works again", function()
    local srv = helper.redis_start()
    local list = run_user("orders-host", SUBS, "~orders:delayed:post")
    setuser(srv, list)
    local host = helper.host_start({ "--http", "127.0.0.1:0" }, {
      url = false, env = { REDIS_URL = url_of(srv, "orders-host") },
      dir = helper.handlers_dir({ ["post.lua"] = POST }),
    })
    local port = tonumber(host:wait_records({ msg = "health endpoint listening" }, 1, 20)[1].port)
    host:wait_log(READY, 20, { plain = true })
    local body = helper.wait_until(function()
      local code, b = helper.http_get(port, "/readyz")
      return code == 503 and b and b:find("delay-set sweep", 1, true) and b
    end, 20, "/readyz 503 naming the sweep")
    assert.matches("^subscription post: stuck: the delay%-set sweep failing for %d+ ms", body)
    assert.matches("orders:delayed:post", body, 1, true)
    assert.matches("NOPERM", body, 1, true)

    srv:cli("ACL", "SETUSER", "orders-host", "~orders:delayed:post")
    helper.wait_until(function() return helper.http_get(port, "/readyz") == 200 end, 20, "/readyz 200 again")
    host:wait_log('msg="the delay-set sweep works again"', 10, { plain = true })
    assert.equal(0, host:stop())
  end)

  it("is 503 while the group's rate limiters are refused, naming the key, and 200 with the documented pattern", function()
    local srv = helper.redis_start()
    setuser(srv, run_user("orders-host", { { stream = "orders", group = "rated" } }))
    for i = 1, 3 do
      srv:cli("XADD", "orders", "*", "data", '{"id":' .. i .. "}", "partition-key", "acme")
    end
    local host = helper.host_start({ "--http", "127.0.0.1:0" }, {
      url = false, env = { REDIS_URL = url_of(srv, "orders-host") },
      dir = helper.handlers_dir({ ["rated.lua"] = [[
local ls = require "luastream"
return { stream = "orders", group = "rated", start = "beginning", read = "claiming", claim_fallback = true,
  min_idle = "1s", rate = "50/s", rate_per_key = "20/s",
  handle = function(order) ls.log.info("order rated", { id = order.id }) end }
]] }),
    })
    local port = tonumber(host:wait_records({ msg = "health endpoint listening" }, 1, 20)[1].port)
    local function unready(work)
      return helper.wait_until(function()
        local code, b = helper.http_get(port, "/readyz")
        return code == 503 and b and b:find(work, 1, true) and b
      end, 20, "/readyz 503 naming " .. work)
    end
    -- without the group's limiter nothing is read
    local body = unready("the rate limit's permits")
    assert.matches("^subscription rated: stuck: the rate limit's permits failing for %d+ ms: "
      .. "EVAL %(rate%) on luastream:rate:{orders}:rated: ", body)
    assert.matches("NOPERM", body, 1, true)
    local rec = host:wait_records({ msg = "rate limit: taking permits failed, reading waits" }, 1, 10)[1]
    assert.equal("error", rec.level)
    assert.equal("luastream:rate:{orders}:rated", rec.key)

    -- the group's limiter alone, without the `*`: entries are read, and
    -- wait for their key's limiter
    srv:cli("ACL", "SETUSER", "orders-host", "~luastream:rate:{orders}:rated")
    host:wait_records({ msg = "the rate limit's permits works again" }, 1, 10)
    body = unready("rate_per_key's permits")
    assert.matches("EVAL (rate_per_key) on luastream:rate:{orders}:rated:key:acme: ", body, 1, true)
    rec = host:wait_records({ msg = "rate_per_key: taking permits failed, keys wait" }, 1, 10)[1]
    assert.equal("luastream:rate:{orders}:rated:key:acme", rec.key)
    assert.equal(0, host:count({ msg = "order rated" }))

    -- the documented pattern
    srv:cli("ACL", "SETUSER", "orders-host", "~luastream:rate:{orders}:rated*")
    helper.wait_until(function() return helper.http_get(port, "/readyz") == 200 end, 20, "/readyz 200 again")
    host:wait_records({ msg = "order rated" }, 3, 20, "every order once its key's limiter works")
    assert.equal(0, host:stop())
  end)
end)
