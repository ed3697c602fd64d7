-- The web console at its edges: dead letters the replay script refuses after
-- a preview took them, previews and lists over long or large dead-letter
-- streams, entries of many fields, ids given twice, and the overview while
-- its Redis connection comes back. The standalone `luastream console` on a
-- DIR is used where handlers need not run, so that the dead letters are
-- exactly those the test writes.
local helper = require "tests.integration.helper"
local console = require "tests.integration.support.console"
local cjson = require "cjson"
local files = require "tests.integration.support.files"
local processes = require "tests.integration.support.processes"
local sys = require "tests.integration.support.sys"

local ALICE = console.ALICE

-- A handler that only names its streams: the console reads DIR, nothing runs.
local PAYMENTS = [[
return {
  stream = "payments", group = "ledger", dead_letter = "payments.dead",
  handle = function() end,
}
]]

local function standalone(srv)
  local h = console.start({ command = "console", server = srv,
    dir = helper.handlers_dir({ ["post.lua"] = PAYMENTS }) })
  local c = console.client(h.port)
  c:login(ALICE)
  return h, c
end

-- A dead letter as luastream writes it (provenance fields), with more fields.
local function dead_letter(srv, source_id, more)
  local argv = { "XADD", "payments.dead", "*", "data", '{"n":1}', "dead-letter-stream", "payments",
    "dead-letter-group", "ledger", "dead-letter-reason", "rejected" }
  if source_id then
    argv[#argv + 1] = "dead-letter-id"
    argv[#argv + 1] = source_id
  end
  for _, v in ipairs(more or {}) do argv[#argv + 1] = v end
  return srv:cli(unpack(argv))
end

-- n entries on key in one server-side loop (fields: the pairs of fields).
local function fill(srv, key, n, fields)
  local script = "for i = 1, tonumber(ARGV[1]) do redis.call('XADD', KEYS[1], '*', unpack(ARGV, 2)) end"
  srv:call("EVAL", script, "1", key, tostring(n), unpack(fields))
end

-- Calls of a command (INFO commandstats).
local function calls(srv, cmd)
  local n = srv:cli("INFO", "commandstats"):match("cmdstat_" .. cmd:gsub("|", "%%|") .. ":calls=(%d+)")
  return tonumber(n or 0)
end

describe("the console at its edges", function()
  after_each(helper.cleanup)

  -- The preview checks what the replay script checks of an entry's
  -- provenance (here: no dead-letter-id), so it never shows an id the
  -- script would refuse for it.
  it("refuses in the preview a dead letter the replay script would refuse", function()
    local srv = helper.redis_start()
    local good = dead_letter(srv, "1-0")
    local no_id = dead_letter(srv, nil)
    local _, c = standalone(srv)
    local preview = c:post_json("/api/dead-letters/preview", { { "action", "replay" },
      { "stream", "payments.dead" }, { "id", good }, { "id", no_id } })
    assert.same({ good }, preview.ids)
    assert.equal(1, #preview.refused)
    assert.equal(no_id, preview.refused[1].id)
    assert.matches("dead%-letter%-id", preview.refused[1].why)
    local done = c:post_json("/api/dead-letters/replay", { { "stream", "payments.dead" }, { "id", good } })
    assert.is_nil(done.error)
    assert.equal(1, #done.replayed)
    assert.equal(1, srv:xlen("payments:retry:ledger"))
  end)

  -- What the script alone can tell (a dead letter kept cut whose source
  -- entry is gone) makes it refuse its whole batch: the others of the batch
  -- are then replayed one by one, and the one refused is named with why.
  it("replays the others of a batch the script refuses for one of them", function()
    local srv = helper.redis_start()
    local good = dead_letter(srv, "1-0")
    local cut = dead_letter(srv, "2-0", { "dead-letter-cut", "9999999" })
    local later = dead_letter(srv, "3-0")
    local _, c = standalone(srv)
    local body = { { "stream", "payments.dead" }, { "id", good }, { "id", cut }, { "id", later } }
    local preview = c:post_json("/api/dead-letters/preview", { { "action", "replay" }, { "stream", "payments.dead" },
      { "id", good }, { "id", cut }, { "id", later } })
    assert.equal(3, preview.count)
    local done = c:post_json("/api/dead-letters/replay", body)
    assert.is_nil(done.error, cjson.encode(done))
    assert.equal(2, #done.replayed, cjson.encode(done))
    assert.equal(1, #done.skipped)
    assert.equal(cut, done.skipped[1].id)
    assert.matches("cut", done.skipped[1].why)
    assert.equal(2, srv:xlen("payments:retry:ledger"))
    assert.equal(1, srv:xlen("payments.dead"))
  end)

  -- A preview of all that match scans as far as the list does (5,000
  -- entries), lists at most 100 of those it refuses and counts them all.
  it("bounds the scan and the refused list of a preview of all that match", function()
    local srv = helper.redis_start()
    -- 10,050 entries without provenance: each refused, "not a dead letter"
    fill(srv, "payments.dead", 10050, { "data", "x" })
    local _, c = standalone(srv)
    local before = calls(srv, "xrevrange")
    local res = c:post("/api/dead-letters/preview", { { "action", "delete" }, { "stream", "payments.dead" },
      { "all", "1" } })
    assert.equal(200, res.status, res.body)
    local pages = calls(srv, "xrevrange") - before
    assert.is_true(#res.json.refused <= 10000,
      "the preview lists " .. #res.json.refused .. " refused entries (" .. #res.body .. " bytes)")
    assert.is_true(pages <= 10, "one preview read " .. pages .. " pages of 500 (the list stops at 5,000 entries)")
  end)

  -- The same with filters that match nothing: one request never reads the
  -- whole stream, whatever its length.
  it("bounds the scan of a preview whose filters match nothing", function()
    local srv = helper.redis_start()
    fill(srv, "payments.dead", 20000, { "data", "x", "dead-letter-stream", "payments" })
    local _, c = standalone(srv)
    local before = calls(srv, "xrevrange")
    local pv = c:post_json("/api/dead-letters/preview", { { "action", "delete" }, { "stream", "payments.dead" },
      { "all", "1" }, { "q", "no-such-text" } })
    assert.equal(0, pv.count)
    local pages = calls(srv, "xrevrange") - before
    assert.is_true(pages <= 10, "one preview read " .. pages .. " pages of 500 entries (20,000 entries)")
  end)

  -- A row of the list cuts every text field (the body to 200 bytes, the
  -- others to 1,000), so a page of 500 rows stays small whatever the errors.
  it("cuts every text field of a dead-letter row, not the body only", function()
    local srv = helper.redis_start()
    -- 512 KiB made by Redis (a command-line argument is at most 128 KiB)
    srv:call("EVAL", "local big = string.rep('e', 512 * 1024) " ..
      "return redis.call('XADD', KEYS[1], '*', 'data', '{}', 'dead-letter-stream', 'payments', " ..
      "'dead-letter-group', 'ledger', 'dead-letter-id', '1-0', 'dead-letter-error', big, " ..
      "'dead-letter-handler', big)", "1", "payments.dead")
    local _, c = standalone(srv)
    local res = c:get("/api/dead-letters?stream=payments.dead")
    assert.equal(200, res.status)
    local row = res.json.entries[1]
    assert.is_true(#row.body <= 200)
    assert.is_true(#row.error < 64 * 1024, "the list row carries an error of " .. #row.error .. " bytes")
    assert.is_true(#row.handler < 64 * 1024, "the list row carries a handler of " .. #row.handler .. " bytes")
  end)

  -- An entry of many fields: each says whether it was shown as \xNN.
  it("says for every field of an entry whether it was escaped", function()
    local srv = helper.redis_start()
    local argv = { "XADD", "payments", "*" }
    for i = 1, 600 do
      argv[#argv + 1] = "f" .. i
      argv[#argv + 1] = i == 600 and "\1bell" or "v"
    end
    local id = srv:call(unpack(argv))
    local _, c = standalone(srv)
    local e = c:json("/api/entry?key=payments&id=" .. id)
    assert.equal(600, #e.fields)
    assert.equal(#e.fields, #e.escaped)
    assert.is_true(e.escaped[600])
  end)

  -- An id given twice in one action, in two batches of 500: replayed once,
  -- and the rest of its batch too.
  it("replays every distinct id given, whatever the repeats", function()
    local srv = helper.redis_start()
    local ids = {}
    for i = 1, 501 do ids[i] = dead_letter(srv, i .. "-0") end
    local _, c = standalone(srv)
    local body = { { "stream", "payments.dead" } }
    for _, id in ipairs(ids) do body[#body + 1] = { "id", id } end
    body[#body + 1] = { "id", ids[1] } -- batch 2: ids[501] and ids[1] again
    local done = c:post_json("/api/dead-letters/replay", body)
    assert.equal(501, #(done.replayed or {}), "replayed " .. #(done.replayed or {}) .. " of 501: " ..
      tostring(done.error))
    assert.equal(0, srv:xlen("payments.dead"))
  end)

  -- The overview asked while the console's Redis connection comes back
  -- waits for the refresh on the new connection (a refresh that lost its
  -- connection is sent once more), and pages asking meanwhile share it: one
  -- refresh, never two at once on the same state.
  it("answers an overview asked while its Redis connection comes back, and refreshes once", function()
    local srv = helper.redis_start({ args = { "--enable-debug-command", "yes" } })
    srv:cli("XADD", "orders", "*", "data", "{}")
    srv:cli("XGROUP", "CREATE", "orders", "ship", "0")
    local h = console.start({ command = "console", server = srv, dir = { "orders" },
      args = { "--console-interval", "100ms" } })
    local c = console.client(h.port, { bearer = ALICE })
    local xinfo0 = calls(srv, "xinfo|stream")
    c:json("/api/overview") -- the console's session is up
    local asked = sys.now()
    local per_refresh = calls(srv, "xinfo|stream") - xinfo0
    assert.is_true(per_refresh > 0)
    -- the console's connection killed, then Redis busy for 3 s: the console
    -- reconnects, and its new connection waits for Redis
    local pipe = srv:pipe_async({ { "CLIENT", "KILL", "TYPE", "normal" }, { "DEBUG", "SLEEP", "3" } })
    processes.wait_until(function()
      local ok, code, pong = pcall(processes.run, srv:_cli_argv({ "PING" }), { timeout = 0.3 })
      return not ok or code ~= 0 or files.trim(pong) ~= "PONG"
    end, 10, "Redis busy in DEBUG SLEEP")
    -- past the interval, so that page A needs a refresh of its own
    processes.wait_until(function() return sys.now() - asked > 0.2 end, 5, "the interval past")
    local a = c:get("/api/overview")
    -- then two pages ask at once while the new connection waits for Redis
    local dir = files.tmpdir("curl")
    local function page(name)
      return processes.spawn({ "curl", "-s", "-o", dir .. "/" .. name, "-w", "%{http_code}", "-H",
        "Authorization: Bearer " .. ALICE, "http://127.0.0.1:" .. h.port .. "/api/overview" },
        { stdout = dir .. "/" .. name .. ".code" })
    end
    local b, d = page("b"), page("d")
    assert.is_true(b:wait(20) ~= nil and d:wait(20) ~= nil, "curl did not end")
    pipe:wait(10)
    local refreshes = (calls(srv, "xinfo|stream") - xinfo0) / per_refresh - 1
    local function said(name) return files.read_file(dir .. "/" .. name .. ".code") end
    local all = string.format("page A: %d %s; B: %s %s; D: %s %s; the console %s", a.status, a.body,
      said("b"), files.read_file(dir .. "/b"):sub(1, 120), said("d"), files.read_file(dir .. "/d"):sub(1, 120),
      h:alive() and "runs" or "died") .. string.format("; %g refreshes after Redis came back", refreshes)
    assert.equal(200, a.status, all)
    assert.equal("200", said("b"), all)
    assert.equal("200", said("d"), all)
    assert.is_true(h:alive(), all)
    assert.equal(1, refreshes, all) -- B and D share one
  end)
end)
