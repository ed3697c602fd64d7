-- The web console's API over HTTP against the real binary and a real
-- redis-server: the overview (its numbers those of XINFO, XLEN and XPENDING,
-- one refresh from Redis per interval however many ask), hostile names and
-- bodies as safe JSON, pending entries paged, dead letters (filters, counts,
-- preview, replay, delete, the audit log), reload under `run --console`, and
-- the standalone `luastream console` (DIR or STREAM names, SIGTERM).
-- support/console.lua's client checks the security headers of every answer.
local helper = require "tests.integration.helper"
local console = require "tests.integration.support.console"
local cjson = require "cjson"

local ALICE, BOB = console.ALICE, console.BOB
local READY = 'msg="host ready"'
local esc = console.escape

-- The overview's row of stream and group, or nil.
local function row(doc, stream, group)
  for _, g in ipairs(doc.groups) do
    if g.stream == stream and g.group == group then return g end
  end
end

-- The number of XINFO calls the server has answered (INFO commandstats).
-- (subcommands counted apart, cmdstat_xinfo|groups, or as one before Redis 7).
local function xinfo_calls(srv)
  local total = 0
  for calls in srv:cli("INFO", "commandstats"):gmatch("cmdstat_xinfo[^:]*:calls=(%d+)") do
    total = total + tonumber(calls)
  end
  return total
end

local function standalone(srv, names, args)
  return console.start({ command = "console", server = srv, dir = names, args = args })
end

describe("console overview", function()
  after_each(helper.cleanup)

  it("shows what XINFO GROUPS, XLEN and XPENDING say of a stream with pending entries", function()
    local srv = helper.redis_start()
    local ids = {}
    for i = 1, 7 do ids[i] = srv:cli("XADD", "orders", "*", "data", '{"n":' .. i .. "}") end
    srv:cli("XGROUP", "CREATE", "orders", "ship", "0")
    srv:cli("XGROUP", "CREATE", "orders", "bill", "0")
    srv:cli("XREADGROUP", "GROUP", "ship", "worker-1", "COUNT", "3", "STREAMS", "orders", ">")
    srv:cli("XREADGROUP", "GROUP", "ship", "worker-2", "COUNT", "1", "STREAMS", "orders", ">")
    srv:cli("XACK", "orders", "ship", ids[1])
    local h = standalone(srv, { "orders" })
    local c = console.client(h.port, { bearer = ALICE })
    local doc = c:json("/api/overview")
    assert.equal("number", type(doc.refreshed_ms))
    assert.equal("number", type(doc.refresh_took_ms))
    local xlen = srv:xlen("orders")
    local pending = srv:call("XPENDING", "orders", "ship")
    for _, name in ipairs { "ship", "bill" } do
      local g = assert(row(doc, "orders", name), "no row for orders/" .. name .. ": " .. cjson.encode(doc))
      local info = srv:group("orders", name)
      assert.equal(xlen, g.source.length)
      assert.equal(xlen, g.length)
      assert.is_true(g.source.exists)
      assert.is_true(g.source.group_exists)
      assert.equal(info.lag, g.source.lag, name)
      assert.equal(info.pending, g.source.pending, name)
      assert.equal(info["last-delivered-id"], g.source.last_delivered_id, name)
    end
    local ship = row(doc, "orders", "ship")
    assert.equal(3, ship.source.lag)
    assert.equal(3, ship.source.pending)
    assert.equal(pending[1], ship.source.pending)
    local consumers = {}
    for _, cons in ipairs(ship.consumers) do consumers[cons.name] = cons end
    local want = {}
    for _, p in ipairs(pending[4]) do want[p[1]] = tonumber(p[2]) end
    assert.same({ ["worker-1"] = 2, ["worker-2"] = 1 }, want)
    for name, n in pairs(want) do
      assert(consumers[name], "no consumer " .. name .. " in " .. cjson.encode(ship.consumers))
      assert.equal(n, consumers[name].pending)
      assert.equal("number", type(consumers[name].idle_ms))
    end
    assert.equal(7, row(doc, "orders", "bill").source.lag)
    assert.equal(0, row(doc, "orders", "bill").source.pending)
    assert.same({}, row(doc, "orders", "bill").consumers)
    assert.equal(0, h:stop())
  end)

  it("refreshes from Redis once per interval however many ask, and again after it", function()
    local srv = helper.redis_start()
    srv:cli("XADD", "orders", "*", "data", "{}")
    srv:cli("XGROUP", "CREATE", "orders", "ship", "0")
    local h = standalone(srv, { "orders" }, { "--console-interval", "2s" })
    local c = console.client(h.port, { bearer = ALICE })
    assert.equal(2000, c:json("/api/session").interval_ms)
    assert.equal(0, xinfo_calls(srv), "a refresh before anybody asked")
    local first = c:json("/api/overview")
    local per_refresh = xinfo_calls(srv)
    assert.is_true(per_refresh > 0)
    local t0 = helper.now()
    local n = 0
    -- everything asked within the interval is the same refresh
    while helper.now() - t0 < 1.0 do
      local doc = console.client(h.port, { bearer = n % 2 == 0 and ALICE or BOB }):json("/api/overview")
      assert.equal(first.refreshed_ms, doc.refreshed_ms)
      n = n + 1
    end
    assert.is_true(n >= 10, n .. " requests")
    assert.equal(per_refresh, xinfo_calls(srv), n .. " requests within the interval made another refresh")
    -- a change shows only after the next refresh, which comes once the interval is over
    srv:cli("XADD", "orders", "*", "data", "{}")
    local second = helper.wait_until(function()
      local doc = c:json("/api/overview")
      return doc.refreshed_ms ~= first.refreshed_ms and doc
    end, 10, "the next refresh")
    local t_second = helper.now()
    assert.is_true(second.refreshed_ms - first.refreshed_ms >= 1800, "refreshed after "
      .. (second.refreshed_ms - first.refreshed_ms) .. " ms")
    assert.equal(2, row(second, "orders", "ship").source.length)
    assert.equal(2 * per_refresh, xinfo_calls(srv))
    -- requests arriving together while a refresh is under way wait for that one
    helper.wait_until(function()
      return helper.now() - t_second > 2.1
    end, 5, "the interval over")
    local out_dir = helper.tmpdir("curl")
    local argv = { "curl", "-sS", "--fail", "--parallel", "--parallel-immediate", "--parallel-max", "20",
      "-H", "Authorization: Bearer " .. ALICE }
    for i = 1, 20 do
      argv[#argv + 1] = "http://127.0.0.1:" .. h.port .. "/api/overview"
      argv[#argv + 1] = "-o"
      argv[#argv + 1] = out_dir .. "/" .. i
    end
    local code, _, err = helper.run(argv)
    assert.equal(0, code, err)
    local stamps = {}
    for i = 1, 20 do stamps[i] = cjson.decode(helper.read_file(out_dir .. "/" .. i)).refreshed_ms end
    for _, ms in ipairs(stamps) do
      assert.equal(stamps[1], ms)
    end
    assert.are_not.equal(second.refreshed_ms, stamps[1])
    assert.equal(3 * per_refresh, xinfo_calls(srv), "20 requests at once made more than one refresh")
    assert.equal(0, h:stop())
  end)
end)

-- A stream name, a consumer name and a body that would be markup, a
-- terminal escape and bytes that are not UTF-8.
local HOSTILE = "<script>alert(1)</script>\27[31m\255\254"

describe("console hostile data", function()
  after_each(helper.cleanup)

  it("answers names and bodies of any bytes as valid JSON: no markup, \\xNN text, escaped flags", function()
    local srv = helper.redis_start()
    local stream = "orders" .. HOSTILE
    local id = srv:cli("XADD", stream, "*", "data", '{"note":"' .. HOSTILE .. '"}', "plain", "fine\ttext\n",
      "k" .. HOSTILE, "v")
    srv:cli("XGROUP", "CREATE", stream, "ship", "0")
    srv:cli("XREADGROUP", "GROUP", "ship", "w" .. HOSTILE, "STREAMS", stream, ">")
    local h = standalone(srv, { stream })
    local c = console.client(h.port, { bearer = ALICE })
    local function safe(res, what)
      assert.equal(200, res.status, what .. ": " .. res.body)
      assert.is_nil(res.body:find("[<>\27\254\255]"), what .. ": raw markup, escape or bad bytes: " .. res.body)
      assert.matches("\\u003cscript\\u003e", res.body, 1, true)
      return res.json
    end
    local doc = safe(c:get("/api/overview"), "overview")
    local g = assert(doc.groups[1])
    assert.equal("orders<script>alert(1)</script>\\x1b[31m\\xff\\xfe", g.stream)
    assert.equal("w<script>alert(1)</script>\\x1b[31m\\xff\\xfe", g.consumers[1].name)

    local e = safe(c:get("/api/entry?key=" .. esc(stream) .. "&id=" .. id), "entry")
    assert.is_true(e.found)
    assert.equal("orders<script>alert(1)</script>\\x1b[31m\\xff\\xfe", e.key)
    assert.same({
      { "data", '{"note":"<script>alert(1)</script>\\x1b[31m\\xff\\xfe"}' },
      { "plain", "fine\ttext\n" },
      { "k<script>alert(1)</script>\\x1b[31m\\xff\\xfe", "v" },
    }, e.fields)
    assert.same({ true, false, true }, e.escaped)

    local p = safe(c:get("/api/pending?key=" .. esc(stream) .. "&group=ship"), "pending")
    assert.equal(1, #p.entries)
    assert.equal(id, p.entries[1].id)
    assert.equal("w<script>alert(1)</script>\\x1b[31m\\xff\\xfe", p.entries[1].consumer)
    -- an entry that is not there, and a key this console does not show
    local res = c:get("/api/entry?key=" .. esc(stream) .. "&id=1-0")
    assert.equal(200, res.status)
    assert.is_false(res.json.found)
    res = c:get("/api/entry?key=other&id=" .. id)
    assert.equal(404, res.status)
    res = c:get("/api/entry?key=" .. esc(stream) .. "&id=" .. esc("<b>"))
    assert.equal(400, res.status)
    assert.is_nil(res.body:find("<", 1, true), res.body)
    assert.equal(0, h:stop())
  end)
end)

describe("console pending entries", function()
  after_each(helper.cleanup)

  it("pages 120 pending entries 50 at a time: 50, 50, 20, each page going on after the last", function()
    local srv = helper.redis_start()
    local cmds = {}
    for i = 1, 120 do cmds[i] = { "XADD", "orders", "*", "data", '{"n":' .. i .. "}" } end
    srv:pipe(cmds)
    srv:cli("XGROUP", "CREATE", "orders", "ship", "0")
    srv:cli("XREADGROUP", "GROUP", "ship", "w1", "COUNT", "70", "STREAMS", "orders", ">")
    srv:cli("XREADGROUP", "GROUP", "ship", "w2", "COUNT", "50", "STREAMS", "orders", ">")
    local want = srv:pending_ids("orders", "ship")
    assert.equal(120, #want)
    local h = standalone(srv, { "orders" })
    local c = console.client(h.port, { bearer = ALICE })
    local got, after, sizes = {}, nil, {}
    repeat
      local page = c:json("/api/pending?stream=orders&group=ship&key=orders&count=50"
        .. (after and ("&after=" .. after) or ""))
      assert.equal("orders", page.key)
      assert.equal("ship", page.group)
      sizes[#sizes + 1] = #page.entries
      for _, e in ipairs(page.entries) do
        got[#got + 1] = e.id
        assert.equal(#got <= 70 and "w1" or "w2", e.consumer)
        assert.equal(1, e.deliveries)
      end
      after = page.next ~= cjson.null and page.next or nil
      if after then assert.equal(got[#got], after) end
    until after == nil or #sizes > 5
    assert.same({ 50, 50, 20 }, sizes)
    assert.same(want, got)
    -- a retry stream nothing was retried on yet: nothing pending there
    local retry = c:json("/api/pending?key=orders:retry:ship&group=ship")
    assert.same({}, retry.entries)
    assert.equal(cjson.null, retry.next)
    -- the default page, and a refused after
    assert.equal(50, #c:json("/api/pending?key=orders&group=ship").entries)
    assert.equal(400, c:get("/api/pending?key=orders&group=ship&after=nope").status)
    assert.equal(400, c:get("/api/pending?key=orders").status)
    assert.equal(404, c:get("/api/pending?key=payments&group=ship").status)
    assert.equal(0, h:stop())
  end)
end)

-- Rejects a closed account's payment the first time it sees it, and posts
-- it when it comes back (a replay).
local REJECT_ONCE = [[
local ls = require "luastream"
local seen = {}
return {
  stream = "payments", group = "ledger", dead_letter = "payments.dead",
  handle = function(p, ctx)
    if p.account == "closed" and not seen[p.id] then
      seen[p.id] = true
      return ls.reject("account closed: " .. p.note)
    end
    ls.log.info("payment posted", { payment_id = p.id, entry_id = ctx.id })
  end,
}
]]

local function payment(i, note) return string.format('{"id":%d,"account":"closed","note":"%s"}', i, note) end

-- The dead letters of payments.dead by the id of their source entry.
local function by_source(srv)
  local out = {}
  for _, e in ipairs(srv:xrange("payments.dead")) do
    if e.fields["dead-letter-id"] then out[e.fields["dead-letter-id"]] = e end
  end
  return out
end

local function ids_of(entries)
  local out = {}
  for i, e in ipairs(entries) do out[i] = e.id end
  return out
end

describe("console dead letters", function()
  after_each(helper.cleanup)

  it("lists with counts by reason, filters by reason and text, previews, replays and deletes exactly the ids, logging who", function()
    local srv = helper.redis_start()
    local h = console.start({ server = srv, dir = helper.handlers_dir({ ["post.lua"] = REJECT_ONCE }) })
    h:wait_log(READY, 20, { plain = true })
    local src = {}
    for i = 1, 4 do src[i] = helper.publish(srv, "payments", payment(i, i == 3 and "the needle" or "n" .. i)) end
    src[5] = srv:cli("XADD", "payments", "*", "data", "{not json")
    src[6] = srv:cli("XADD", "payments", "*", "data", "{nor this")
    helper.wait_until(function() return srv:xlen("payments.dead") == 6 end, 10, "6 dead letters")
    local dls = by_source(srv)
    local dl = {}
    for i = 1, 6 do dl[i] = assert(dls[src[i]], "no dead letter of " .. src[i]).id end
    -- an entry without provenance, added by hand
    local forged = srv:cli("XADD", "payments.dead", "*", "data", '{"id":9,"account":"closed","note":"forged"}')

    local alice = console.client(h.port)
    alice:login(ALICE)
    local list = alice:json("/api/dead-letters?stream=payments.dead")
    assert.equal("payments.dead", list.stream)
    assert.equal(7, list.length)
    assert.equal(7, list.scanned)
    assert.equal(cjson.null, list.before)
    assert.same({ rejected = 4, ["decode-error"] = 2, [""] = 1 }, list.counts)
    -- newest first (the host dead-letters in the order it handles entries)
    local all, rejected, decode = {}, {}, {}
    for _, e in ipairs(srv:xrange("payments.dead")) do
      table.insert(all, 1, e.id)
      local reason = e.fields["dead-letter-reason"]
      if reason == "rejected" then table.insert(rejected, 1, e.id) end
      if reason == "decode-error" then table.insert(decode, 1, e.id) end
    end
    assert.same(all, ids_of(list.entries))
    assert.equal(forged, all[1])
    local r
    for _, e in ipairs(list.entries) do
      if e.id == dl[1] then r = e end
    end
    assert.equal("rejected", r.reason)
    assert.equal("post.lua", r.handler)
    assert.equal("payments", r.source_stream)
    assert.equal("ledger", r.source_group)
    assert.equal(src[1], r.source_id)
    assert.equal(1, r.deliveries)
    assert.equal("account closed: n1", r.error)
    assert.equal(payment(1, "n1"), r.body)
    assert.is_false(r.escaped)
    assert.equal(tonumber(dls[src[1]].fields["dead-letter-time"]), r.time_ms)
    for _, e in ipairs(list.entries) do
      if e.id == dl[5] then
        assert.equal("decode-error", e.reason)
        assert.equal("{not json", e.body)
      end
    end
    assert.equal(cjson.null, list.entries[1].reason)

    -- the reason filter keeps the counts of the other filters
    list = alice:json("/api/dead-letters?stream=payments.dead&reason=rejected")
    assert.same(rejected, ids_of(list.entries))
    assert.equal(4, #rejected)
    assert.same({ rejected = 4, ["decode-error"] = 2, [""] = 1 }, list.counts)
    list = alice:json("/api/dead-letters?stream=payments.dead&q=" .. esc("the needle"))
    assert.same({ dl[3] }, ids_of(list.entries))
    assert.same({ rejected = 1 }, list.counts)
    list = alice:json("/api/dead-letters?stream=payments.dead&reason=rejected&q=nothing-like-it")
    assert.same({}, ids_of(list.entries))
    assert.equal(404, alice:get("/api/dead-letters?stream=payments").status)
    assert.equal(400, alice:get("/api/dead-letters?stream=payments.dead&since=yesterday").status)

    -- preview: the ids that would move, and those refused with why
    local preview = alice:post_json("/api/dead-letters/preview", { { "action", "replay" },
      { "stream", "payments.dead" }, { "id", dl[1] }, { "id", "1-1" }, { "id", dl[2] }, { "id", forged } })
    assert.equal("replay", preview.action)
    assert.equal(2, preview.count)
    assert.same({ dl[1], dl[2] }, preview.ids)
    assert.is_false(preview.truncated)
    assert.equal(2, #preview.refused)
    assert.same({ "1-1", "not on the stream" }, { preview.refused[1].id, preview.refused[1].why })
    assert.equal(forged, preview.refused[2].id)
    assert.matches("not a dead letter", preview.refused[2].why, 1, true)
    assert.equal(7, srv:xlen("payments.dead"), "a preview moved something")
    assert.equal(0, h:count({ msg = "console action" }))

    -- replay: exactly those ids, onto the group's retry stream; the handler now posts them
    local done = alice:post_json("/api/dead-letters/replay", { { "stream", "payments.dead" }, { "id", dl[1] },
      { "id", dl[2] }, { "id", forged } })
    assert.equal(2, #done.replayed, cjson.encode(done))
    local new_ids = {}
    for i, m in ipairs(done.replayed) do
      assert.equal(dl[i], m.id)
      assert.equal("payments:retry:ledger", m.to)
      assert.matches("^%d+%-%d+$", m.new_id)
      new_ids[i] = m.new_id
    end
    assert.same({ { id = forged, why = "not a dead letter: it has no dead-letter-stream field" } }, done.skipped)
    assert.same({}, srv:xrange("payments.dead", dl[1], dl[1]))
    assert.same({}, srv:xrange("payments.dead", dl[2], dl[2]))
    assert.equal(5, srv:xlen("payments.dead"))
    local posted = h:wait_records({ msg = "payment posted" }, 2, 10, "the replayed payments posted")
    local seen = {}
    for _, rec in ipairs(posted) do seen[rec.payment_id] = rec.entry_id end
    assert.same({ ["1"] = new_ids[1], ["2"] = new_ids[2] }, seen)
    helper.wait_until(function()
      return #srv:pending_ids("payments:retry:ledger", "ledger") == 0
    end, 10, "the replayed entries acked")
    local audit = h:records({ msg = "console action", action = "replay" })
    assert.equal(1, #audit, h:log())
    assert.equal("alice", audit[1].who)
    assert.equal("payments.dead", audit[1].stream)
    assert.equal("2", audit[1].count)
    assert.equal(dl[1] .. "," .. dl[2], audit[1].ids)

    -- delete by filter, previewed, then committed on the ids shown, by another operator
    local bob = console.client(h.port)
    bob:login(BOB)
    preview = bob:post_json("/api/dead-letters/preview", { { "action", "delete" }, { "stream", "payments.dead" },
      { "all", "1" }, { "reason", "decode-error" } })
    assert.same(decode, preview.ids)
    assert.equal(2, #decode)
    assert.equal(2, preview.count)
    assert.same({}, preview.refused)
    local deleted = bob:post_json("/api/dead-letters/delete", { { "stream", "payments.dead" }, { "id", decode[1] },
      { "id", decode[2] }, { "id", forged } })
    assert.equal(2, deleted.deleted)
    assert.equal(1, #deleted.refused)
    assert.equal(forged, deleted.refused[1].id)
    local left = {}
    for _, e in ipairs(srv:xrange("payments.dead")) do table.insert(left, 1, e.id) end
    assert.equal(3, #left)
    assert.same(left, ids_of(bob:json("/api/dead-letters?stream=payments.dead").entries))
    assert.same({}, srv:xrange("payments.dead", decode[1], decode[1]))
    assert.same({}, srv:xrange("payments.dead", decode[2], decode[2]))
    audit = h:records({ msg = "console action", action = "delete" })
    assert.equal(1, #audit, h:log())
    assert.equal("bob", audit[1].who)
    assert.equal("2", audit[1].count)
    assert.equal(decode[1] .. "," .. decode[2], audit[1].ids)
    -- an action takes ids only: the ones a preview showed
    local res = bob:post("/api/dead-letters/delete", { { "stream", "payments.dead" }, { "all", "1" } })
    assert.equal(400, res.status)
    assert.equal(3, srv:xlen("payments.dead"))
    assert.equal(0, h:stop())
  end)

  it("refuses replay without DIR (409); lists and deletes there", function()
    local srv = helper.redis_start()
    local id = srv:cli("XADD", "payments.dead", "*", "data", "{}", "dead-letter-stream", "payments",
      "dead-letter-group", "ledger", "dead-letter-id", "1-0", "dead-letter-reason", "rejected")
    local h = standalone(srv, { "payments", "payments.dead" })
    local c = console.client(h.port)
    c:login(ALICE)
    local session = c:json("/api/session")
    assert.is_false(session.reload)
    assert.equal(cjson.null, session.dir)
    assert.same({ id }, ids_of(c:json("/api/dead-letters?stream=payments.dead").entries))
    local res = c:post("/api/dead-letters/preview", { { "action", "replay" }, { "stream", "payments.dead" },
      { "id", id } })
    assert.equal(409, res.status)
    assert.is_string(res.json.error)
    res = c:post("/api/dead-letters/replay", { { "stream", "payments.dead" }, { "id", id } })
    assert.equal(409, res.status)
    assert.equal(1, srv:xlen("payments.dead"))
    assert.equal(0, srv:call("EXISTS", "payments:retry:ledger"))
    assert.equal(0, h:count({ msg = "console action" }))
    assert.same({ id }, c:post_json("/api/dead-letters/preview", { { "action", "delete" },
      { "stream", "payments.dead" }, { "id", id } }).ids)
    assert.equal(1, c:post_json("/api/dead-letters/delete", { { "stream", "payments.dead" }, { "id", id } }).deleted)
    assert.equal(0, srv:xlen("payments.dead"))
    assert.equal(0, h:stop())
  end)
end)

local VERSIONED = [[
local ls = require "luastream"
return {
  stream = "orders", group = "ship",
  handle = function(order) ls.log.info("order shipped", { id = order.id, by = "%s" }) end,
}
]]

-- handlers[] and running[] of /api/handlers for the file named name.
local function versions(doc, name)
  local disk, running
  for _, f in ipairs(doc.handlers) do
    if f.file:match("[^/]+$") == name then disk = f.version end
  end
  for _, f in ipairs(doc.running ~= cjson.null and doc.running or {}) do
    if f.file:match("[^/]+$") == name then running = f.version end
  end
  return disk, running
end

describe("console reload", function()
  after_each(helper.cleanup)

  it("reloads the handlers under run --console: the running version becomes the one on disk", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["ship.lua"] = VERSIONED:format("v1") })
    local h = console.start({ server = srv, dir = dir, args = { "--no-reload" } })
    h:wait_log(READY, 20, { plain = true })
    local c = console.client(h.port)
    c:login(ALICE)
    local session = c:json("/api/session")
    assert.is_true(session.reload)
    assert.is_true(session.metrics)
    local doc = c:json("/api/handlers")
    local disk, running = versions(doc, "ship.lua")
    assert.is_string(disk)
    assert.equal(disk, running)
    assert.equal("orders", doc.handlers[1].stream)
    assert.equal("ship", doc.handlers[1].group)
    assert.same({}, doc.problems)
    helper.write_file(dir .. "/ship.lua", VERSIONED:format("v2"))
    local disk2, running2 = versions(c:json("/api/handlers"), "ship.lua")
    assert.are_not.equal(disk, disk2)
    assert.equal(running, running2, "reloaded without being asked (--no-reload)")
    local mark = h:mark()
    assert.same({ reloaded = true }, c:post_json("/api/reload", ""))
    h:wait_log("handler reloaded", 10, { plain = true, after = mark })
    helper.wait_until(function()
      local d, r = versions(c:json("/api/handlers"), "ship.lua")
      return d == disk2 and r == disk2, tostring(r)
    end, 10, "the new version running")
    local audit = h:records({ msg = "console action: reloading every handler" })
    assert.equal(1, #audit)
    assert.equal("alice", audit[1].who)
    assert.equal("reload", audit[1].action)
    helper.publish(srv, "orders", '{"id":1}')
    assert.equal("v2", h:wait_records({ msg = "order shipped" }, 1, 10)[1].by)
    assert.matches("luastream_", c:get("/api/metrics").body, 1, true)
    assert.equal(0, h:stop())
  end)
end)

describe("console pause and resume", function()
  after_each(helper.cleanup)

  it("pauses and resumes a group it shows, logging who; the overview shows the pause; others are refused", function()
    local srv = helper.redis_start()
    srv:cli("XGROUP", "CREATE", "orders", "ship", "$", "MKSTREAM")
    local dir = helper.handlers_dir({ ["ship.lua"] = VERSIONED:format("v1") })
    local h = console.start({ command = "console", server = srv, dir = dir })
    local c = console.client(h.port)
    c:login(ALICE)
    assert.equal(cjson.null, row(c:json("/api/overview"), "orders", "ship").pause)
    local r = c:post_json("/api/pause", { { "stream", "orders" }, { "group", "ship" }, { "for", "10m" },
      { "reason", "carrier down" } })
    assert.is_true(r.paused)
    assert.equal("carrier down", r.reason)
    assert.equal("luastream console by alice", r.by)
    assert.is_number(r.until_ms)
    assert.equal("manual", srv:cli("HGET", "luastream:pause:{orders}:ship", "kind"))
    local ttl = tonumber(srv:cli("PTTL", "luastream:pause:{orders}:ship"))
    assert.truthy(ttl > 590000 and ttl <= 600000, ttl)
    -- the next overview reads Redis again and shows it
    local p = row(c:json("/api/overview"), "orders", "ship").pause
    assert.equal("paused", p.state)
    assert.equal("carrier down", p.reason)
    local rec = h:wait_records({ msg = "console action", action = "pause" }, 1, 10)[1]
    assert.equal("alice", rec.who)
    assert.equal("orders", rec.stream)
    assert.equal("ship", rec.group)
    assert.equal("10m", rec["for"])
    assert.equal("carrier down", rec.reason)
    h:wait_records({ msg = "console action done", action = "pause" }, 1, 10)

    r = c:post_json("/api/resume", { { "stream", "orders" }, { "group", "ship" } })
    assert.is_true(r.was_paused)
    assert.equal(0, tonumber(srv:cli("EXISTS", "luastream:pause:{orders}:ship")))
    assert.equal(cjson.null, row(c:json("/api/overview"), "orders", "ship").pause)
    assert.is_false(c:post_json("/api/resume", { { "stream", "orders" }, { "group", "ship" } }).was_paused)
    assert.equal("alice", h:wait_records({ msg = "console action", action = "resume" }, 2, 10)[1].who)

    -- a group the console does not show, a bad duration, no CSRF token
    local res = c:post("/api/pause", { { "stream", "orders" }, { "group", "other" } })
    assert.equal(404, res.status)
    res = c:post("/api/pause", { { "stream", "orders" }, { "group", "ship" }, { "for", "soon" } })
    assert.equal(400, res.status)
    assert.truthy(res.json.error:find("soon", 1, true), res.body)
    res = c:post("/api/pause", { { "stream", "orders" }, { "group", "ship" } }, { csrf = false })
    assert.equal(403, res.status)
    assert.equal(0, tonumber(srv:cli("EXISTS", "luastream:pause:{orders}:ship")))
    assert.equal(0, h:stop())
  end)
end)

describe("luastream console (standalone)", function()
  after_each(helper.cleanup)

  it("serves the overview of DIR's handlers, has no reload nor metrics, and stops on SIGTERM with 0", function()
    local srv = helper.redis_start()
    srv:cli("XADD", "orders", "*", "data", "{}")
    srv:cli("XGROUP", "CREATE", "orders", "ship", "0")
    local dir = helper.handlers_dir({
      ["ship.lua"] = VERSIONED:format("v1"),
      ["nightly.lua"] = 'return { cron = "0 3 * * *", tz = "Europe/Berlin", name = "reports", tick = function() end }',
    })
    local h = console.start({ command = "console", server = srv, dir = dir })
    local c = console.client(h.port, { bearer = ALICE })
    local session = c:json("/api/session")
    assert.is_false(session.reload)
    assert.is_false(session.metrics)
    assert.equal(dir, session.dir)
    local g = assert(row(c:json("/api/overview"), "orders", "ship"))
    assert.equal("ship.lua", g.handlers)
    assert.equal(1, g.source.lag)
    local doc = c:json("/api/handlers")
    assert.equal(cjson.null, doc.running)
    local by_file = {}
    for _, f in ipairs(doc.handlers) do by_file[f.file:match("[^/]+$")] = f end
    assert.equal("ship", by_file["ship.lua"].group)
    -- a scheduled file: when it ticks, under its schedule's name, and no stream
    assert.equal("cron 0 3 * * * Europe/Berlin", by_file["nightly.lua"].schedule)
    assert.equal("reports", by_file["nightly.lua"].schedule_name)
    assert.is_nil(by_file["nightly.lua"].stream)
    local res = c:post("/api/reload", "")
    assert.equal(404, res.status)
    assert.is_string(res.json.error)
    assert.equal(404, c:get("/api/metrics").status)
    -- it ran no handler: nothing read
    assert.equal(1, srv:group("orders", "ship").lag)
    h:signal("TERM")
    assert.equal(0, h:wait_exit(10))
    h:wait_log("signal received: closing the console", 1, { plain = true })
  end)

  it("serves the overview of every group of the STREAMs named, and stops on SIGTERM with 0", function()
    local srv = helper.redis_start()
    srv:cli("XADD", "orders", "*", "data", "{}")
    srv:cli("XGROUP", "CREATE", "orders", "ship", "0")
    srv:cli("XGROUP", "CREATE", "orders", "bill", "$")
    srv:cli("XADD", "invoices", "*", "data", "{}")
    local h = standalone(srv, { "orders", "invoices" })
    local c = console.client(h.port, { bearer = BOB })
    local doc = c:json("/api/overview")
    assert.equal(1, row(doc, "orders", "ship").source.lag)
    assert.equal(0, row(doc, "orders", "bill").source.lag)
    local invoices
    for _, g in ipairs(doc.groups) do
      if g.stream == "invoices" then invoices = g end
    end
    assert(invoices, cjson.encode(doc))
    assert.equal(cjson.null, invoices.group)
    assert.equal(1, invoices.source.length)
    h:signal("TERM")
    assert.equal(0, h:wait_exit(10))
  end)
end)

describe("console on a handler directory that changes", function()
  after_each(helper.cleanup)

  it("follows the files: a dead_letter added to a handler is shown without a reload", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["ship.lua"] = [[return { stream = "orders", group = "ship",
      handle = function() end }]] })
    local h = console.start({ command = "console", server = srv, dir = dir })
    local c = console.client(h.port, { bearer = console.ALICE })
    assert.equal(404, c:get("/api/dead-letters?stream=orders.dead").status)
    assert.equal(cjson.null, c:json("/api/overview").groups[1].dead_letter)
    helper.write_file(dir .. "/ship.lua", [[return { stream = "orders", group = "ship",
      dead_letter = "orders.dead", handle = function() end }]])
    srv:cli("XADD", "orders.dead", "*", "data", "{}", "dead-letter-stream", "orders", "dead-letter-group", "ship",
      "dead-letter-id", "1-0", "dead-letter-reason", "rejected")
    local list = c:json("/api/dead-letters?stream=orders.dead")
    assert.equal(1, list.length)
    assert.equal("rejected", list.entries[1].reason)
  end)
end)

describe("console under run --processes", function()
  after_each(helper.cleanup)

  it("is served by the supervisor: the overview, and a reload that every worker takes", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["ship.lua"] = [[return { stream = "orders", group = "ship",
      handle = function() end }]] })
    local h = console.start({ server = srv, dir = dir, args = { "--processes", "2" } })
    local c = console.client(h.port, { bearer = console.ALICE })
    local s = c:json("/api/session")
    assert.equal("supervisor", s.mode)
    assert.is_true(s.reload)
    assert.is_false(s.metrics)
    h:wait_records({ msg = "host ready" }, 2, 20, "both workers ready")
    local o = c:json("/api/overview")
    assert.equal("orders", o.groups[1].stream)
    assert.equal("ship", o.groups[1].group)
    assert.is_true(o.groups[1].source.group_exists)
    assert.equal(200, c:post("/api/reload", "").status)
    h:wait_records({ msg = "console action: reloading every handler", who = "alice" }, 1, 5)
    h:wait_records({ msg = "signal received: reloading every handler and the TLS files" }, 2, 10,
      "each worker reloading")
    assert.equal(0, h:stop())
  end)
end)
