-- The web console's defects found in review (review/console.md): each test
-- shows one, against the real binary and a real redis-server, and fails
-- until it is fixed. The standalone `luastream console` on a DIR is used
-- where handlers need not run, so that the dead letters are exactly those
-- the test writes.
local helper = require "tests.integration.helper"
local console = require "tests.integration.support.console"
local cjson = require "cjson"
local files = require "tests.integration.support.files"
local processes = require "tests.integration.support.processes"

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

describe("console review", function()
  after_each(helper.cleanup)

  -- F1: the preview's check (console_dead_letters.c refusal()) is weaker than
  -- the replay script's (replay.lua replayed()): an entry with the stream and
  -- group but no dead-letter-id passes the preview, then makes the script
  -- refuse the whole batch, so the good dead letters shown are not replayed.
  it("replays the dead letters its preview accepted, even next to one the script refuses", function()
    local srv = helper.redis_start()
    local good = dead_letter(srv, "1-0")
    local no_id = dead_letter(srv, nil)
    local _, c = standalone(srv)
    local ids = { { "action", "replay" }, { "stream", "payments.dead" }, { "id", good }, { "id", no_id } }
    local preview = c:post_json("/api/dead-letters/preview", ids)
    -- the preview says both will be replayed (or it should refuse no_id)
    local shown = {}
    for _, id in ipairs(preview.ids) do shown[id] = true end
    local done = c:post_json("/api/dead-letters/replay", { { "stream", "payments.dead" }, { "id", good },
      { "id", no_id } })
    if shown[no_id] then
      -- what the preview promised: both go, or at least the good one does
      assert.is_nil(done.error, "the replay failed after a preview that accepted both: " .. cjson.encode(done))
    end
    assert.equal(1, #(done.replayed or {}), "the good dead letter was not replayed: " .. cjson.encode(done))
    assert.equal(1, srv:xlen("payments:retry:ledger"))
  end)

  -- F2: a preview of all=1 scans the whole stream in one request (no
  -- DL_SCAN_LIMIT) and lists every refused entry (no PREVIEW_MAX): memory and
  -- time grow with the stream.
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

  -- F2b: the same with filters that match nothing: the whole stream is read
  -- in one request whatever its length.
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

  -- F3: the list cuts the body to 200 bytes but not the error, reason,
  -- handler or source fields: one page of 500 rows of a stream whose errors
  -- are large is as large as they are.
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

  -- F4: an entry of more than 512 fields: "escaped" stops at 512 while
  -- "fields" goes on (console_browse.c fields_json), so the page cannot tell
  -- which of the later fields were shown as \xNN.
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

  -- F5: ids given twice in one action (more than one batch of 500 apart):
  -- the second batch's script call fails on the id the first replayed, and
  -- the other ids of that batch are not replayed.
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

  -- F6: the overview asked while the console's Redis connection is down
  -- (console_redis ends the old session with client_done) is failed by that
  -- same client_done: redis_ended sees `refreshing` set by the request itself,
  -- answers it 502 and clears `refreshing`, though a new session is on its
  -- way and the refresh is queued on it. A second page asking then starts a
  -- second refresh of the same status_query while the first is queued.
  it("answers an overview asked while its Redis connection comes back, and refreshes once", function()
    local srv = helper.redis_start({ args = { "--enable-debug-command", "yes" } })
    srv:cli("XADD", "orders", "*", "data", "{}")
    srv:cli("XGROUP", "CREATE", "orders", "ship", "0")
    local h = console.start({ command = "console", server = srv, dir = { "orders" },
      args = { "--console-interval", "100ms" } })
    local c = console.client(h.port, { bearer = ALICE })
    local xinfo0 = calls(srv, "xinfo|stream")
    c:json("/api/overview") -- the console's session is up
    local per_refresh = calls(srv, "xinfo|stream") - xinfo0
    assert.is_true(per_refresh > 0)
    -- the console's connection killed, then Redis busy for 3 s: the console
    -- reconnects, and its new connection waits for Redis
    local pipe = srv:pipe_async({ { "CLIENT", "KILL", "TYPE", "normal" }, { "DEBUG", "SLEEP", "3" } })
    processes.wait_until(function()
      local ok, code, pong = pcall(processes.run, srv:_cli_argv({ "PING" }), { timeout = 0.3 })
      return not ok or code ~= 0 or files.trim(pong) ~= "PONG"
    end, 10, "Redis busy in DEBUG SLEEP")
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
