-- Large bodies against the real binary and redis-server: JSON bodies of
-- 100 KB and 1 MB and a binary body with NUL bytes (content-type not JSON)
-- reach the handler and come back in its ls.reply byte for byte, read in
-- many socket reads each, one after another and between small ones. The
-- comparison runs inside Redis (its cjson decodes the reply), so no byte
-- passes through redis-cli's text output.
--
-- Entries far over max_body (100 MB) are never in the host's memory whole
-- (the read's reply is refused as one arrives, and the entries are read
-- again cut), however many a producer adds, and leave it at its steady size; their dead letters keep the fields cut, and replay reads the
-- source entry while it is there.
local helper = require "tests.integration.helper"
local bodies = require "tests.spec.support.bodies"

local READY = 'msg="host ready"'

-- Replies with what it got: the note of a JSON body, or the raw string of a
-- binary one; its length goes in a header, as the handler counted it.
local ECHO = [[
local ls = require "luastream"
return {
  stream = "bodies", group = "echo", reply_to = "bodies.echo", dead_letter = "bodies.dead",
  max_body = 4 * 1024 * 1024,
  handle = function(m)
    local s = type(m) == "string" and m or m.note
    return ls.reply({ value = s }, { headers = { ["seen-bytes"] = #s } })
  end,
}
]]

-- For every reply: its original id, whether its decoded value equals the
-- string kept under expect:<original id>, that string's length, and the
-- length the handler saw.
local CHECK = [=[
local out = {}
for _, e in ipairs(redis.call('XRANGE', KEYS[1], '-', '+')) do
  local f = {}
  for i = 1, #e[2], 2 do f[e[2][i]] = e[2][i + 1] end
  local want = redis.call('GET', 'expect:' .. f['original-id'])
  local got = cjson.decode(f.data).value
  out[#out + 1] = { f['original-id'], got == want and 'same' or 'different', #want, f['seen-bytes'] }
end
return out
]=]

describe("large bodies", function()
  after_each(helper.cleanup)

  it("go through decode and ls.reply byte for byte", function()
    local srv = helper.redis_start()
    local host = helper.host_start({}, { server = srv, dir = helper.handlers_dir({ ["echo.lua"] = ECHO }) })
    host:wait_log(READY, 20, { plain = true })
    local cases = {}
    local function add(id, body, value, binary)
      cases[#cases + 1] = { id = id, len = #value }
      local cmd = { "XADD", "bodies", id, "data", body }
      if binary then cmd[6], cmd[7] = "content-type", "application/octet-stream" end
      srv:pipe({ { "SET", "expect:" .. id, value }, cmd })
    end
    add("1-1", bodies.json(100 * 1024))
    add("1-2", bodies.json(1024 * 1024))
    add("1-3", '{"note":"small"}', "small")
    local bin = bodies.binary(100 * 1024 + 3)
    add("1-4", bin, bin, true)
    add("1-5", bodies.json(1024 * 1024 - 1))
    add("1-6", '{"note":"small again"}', "small again")
    helper.wait_until(function()
      local n = srv:xlen("bodies.echo")
      return n >= #cases, n .. " replies"
    end, 30, #cases .. " replies on bodies.echo")
    local got = srv:call("EVAL", CHECK, 1, "bodies.echo")
    assert.equal(#cases, #got)
    for i, c in ipairs(cases) do
      assert.same({ c.id, "same", c.len, tostring(c.len) }, got[i])
    end
    assert.equal(0, srv:xlen("bodies.dead"))
    assert.same({}, (srv:pending_ids("bodies", "echo")))
    assert.equal(0, host:stop())
  end)

  local MB = 1024 * 1024
  local HUGE = 100 * MB
  -- One entry of `size` bytes of body, made inside Redis (nothing that big
  -- passes through redis-cli).
  local ADD_HUGE = [=[
return redis.call('XADD', KEYS[1], ARGV[1], 'data', string.rep('x', tonumber(ARGV[2])),
                  'source', 'upload-' .. ARGV[1])
]=]
  -- [original-id, #data, source] of every entry of a stream.
  local SIZES = [=[
local out = {}
for _, e in ipairs(redis.call('XRANGE', KEYS[1], '-', '+')) do
  local f = {}
  for i = 1, #e[2], 2 do f[e[2][i]] = e[2][i + 1] end
  out[#out + 1] = { f['original-id'] or e[1], #(f.data or ''), f.source or '' }
end
return out
]=]
  local SCAN = [[
local ls = require "luastream"
return {
  stream = "uploads", group = "scan", start = "beginning",
  reply_to = "uploads.done", dead_letter = "uploads.dead",
  handle = function(m) return ls.reply({ seen = m.note }) end,
}
]]

  local function status_kb(pid, field)
    local f = assert(io.open("/proc/" .. pid .. "/status"))
    local text = f:read("*a")
    f:close()
    return tonumber(text:match(field .. ":%s*(%d+)"))
  end

  local function used_memory(srv)
    return tonumber(srv:cli("INFO", "memory"):match("used_memory:(%d+)"))
  end

  it("over max_body: none held whole, memory given back, dead letters cut, replay from the source", function()
    local srv = helper.redis_start()
    local base = used_memory(srv)
    -- Two there before the host starts (one read could bring both), then
    -- two more added while its read blocks, one after the other.
    srv:call("EVAL", ADD_HUGE, 1, "uploads", "1-1", HUGE)
    srv:call("EVAL", ADD_HUGE, 1, "uploads", "1-2", HUGE)
    srv:call("XADD", "uploads", "1-3", "data", '{"note":"small"}')
    local dir = helper.handlers_dir({ ["scan.lua"] = SCAN })
    local host = helper.host_start({}, {
      server = srv, dir = dir,
      -- under the sanitizer (./dev test), freed memory is reused at once, as without it
      env = { ASAN_OPTIONS = "quarantine_size_mb=0:detect_leaks=1" },
    })
    host:wait_log(READY, 20, { plain = true })
    helper.wait_until(function()
      return srv:xlen("uploads.dead") == 2 and srv:xlen("uploads.done") == 1
    end, 60, "2 dead letters and a reply")
    for i = 4, 5 do
      helper.wait_until(function() return srv:blocked_clients("xreadgroup") == 1 end, 20, "a blocked read")
      srv:call("EVAL", ADD_HUGE, 1, "uploads", "1-" .. i, HUGE)
      helper.wait_until(function() return srv:xlen("uploads.dead") == i - 1 end, 60, (i - 1) .. " dead letters")
    end
    -- No entry over the limits is ever held whole: the broker refuses a
    -- reply as a huge string in it starts (well under 64 MB + 2 x 100 MB).
    local peak = status_kb(host.pid, "VmHWM")
    assert.is_true(peak <= (64 * MB + 2 * MB) / 1024,
      string.format("peak RSS %d KB, over 64 MB + 2 x max_body (1 MB): an entry was held whole", peak))
    -- Back to the steady size (64 MB + 2 x max_body of 1 MB) within 10 s.
    local rss
    helper.wait_until(function()
      rss = status_kb(host.pid, "VmRSS")
      return rss < (64 + 2) * 1024, rss .. " KB"
    end, 10, "RSS back under 66 MB")
    assert.same({}, (srv:pending_ids("uploads", "scan")))

    -- Each dead letter small: the fields cut to their first 1024 bytes, and
    -- the size the entry had.
    local dead = srv:xrange("uploads.dead")
    local ids = { "1-1", "1-2", "1-4", "1-5" }
    for i, d in ipairs(dead) do
      local f = d.fields
      assert.equal("too-large", f["dead-letter-reason"])
      assert.equal(ids[i], f["dead-letter-id"])
      assert.equal(string.format("body is %d bytes, over max_body (1048576)", HUGE), f["dead-letter-error"])
      assert.equal(tostring(#"data" + HUGE + #"source" + #("upload-" .. ids[i]) + 2 * 64), f["dead-letter-cut"])
      assert.equal(string.rep("x", 1024), f.data)
      assert.equal("upload-" .. ids[i], f.source)
    end
    assert.is_true(tonumber(srv:cli("MEMORY", "USAGE", "uploads.dead", "SAMPLES", "0")) < 64 * 1024)
    -- Redis holds the entries, and little more.
    local grown = used_memory(srv) - base - tonumber(srv:cli("MEMORY", "USAGE", "uploads", "SAMPLES", "0"))
    assert.is_true(grown < 16 * MB, string.format("Redis grew by %d bytes besides the stream", grown))
    local code, out, err = helper.luastream("dead-letters", "list", "--redis", srv.url, "uploads.dead")
    assert.equal(0, code, err)
    local size = #"data" + HUGE + #"source" + #"upload-1-1" + 2 * 64 -- 64 a field (entry.h)
    assert.matches("cut +" .. size .. " bytes: its fields are cut here to 1024 bytes each", out)
    assert.equal(0, host:stop())

    -- Replay reads the source entry, whole, while it is there.
    code, out, err = helper.luastream("dead-letters", "replay", "--redis", srv.url, dir, "uploads.dead", "--id", dead[1].id)
    assert.equal(0, code, err)
    assert.is_truthy(out:find(dead[1].id .. " -> uploads:retry:scan ", 1, true), out)
    assert.same({ { "1-1", HUGE, "upload-1-1" } }, srv:call("EVAL", SIZES, 1, "uploads:retry:scan"))
    -- Once it is gone, replay refuses, saying so, and the dead letter stays.
    srv:call("XDEL", "uploads", "1-2")
    code, out, err = helper.luastream("dead-letters", "replay", "--redis", srv.url, dir, "uploads.dead", "--id", dead[2].id)
    assert.equal(1, code, out)
    local refusal = "dead letter " .. dead[2].id .. " on uploads.dead keeps its entry cut (" .. size ..
      " bytes, too large to hold) and the source entry 1-2 on uploads is gone"
    assert.is_truthy(err:find(refusal, 1, true), err)
    assert.equal(3, srv:xlen("uploads.dead"))
    assert.equal(1, srv:xlen("uploads:retry:scan"))
  end)

  -- Each script read, run on the real server as the host runs it: an entry
  -- over the limits comes cut (its fields to 16 bytes here) with the sizes
  -- it had last, the others whole.
  it("over max_body: every read script sends the entry cut, with its sizes", function()
    local srv = helper.redis_start()
    local function script(name) return helper.read_file("host/broker/scripts/" .. name .. ".lua") end
    local LIMITS = { 100, 100 + 65536, 16, 64 }
    local big = string.rep("x", 300)
    -- 1,100 fields of one byte: 1,100 bytes, but 64 more a field (entry.h)
    local many = { "XADD", "s", "1-3" }
    for _ = 1, 1100 do many[#many + 1] = "h"; many[#many + 1] = "" end
    srv:pipe({
      { "XGROUP", "CREATE", "s", "g", "0", "MKSTREAM" },
      { "XGROUP", "CREATE", "s:retry:g", "g", "0", "MKSTREAM" },
      { "XADD", "s", "1-1", "data", big, "source", "a" },
      { "XADD", "s", "1-2", "data", "{}" },
      many,
    })
    local cut = { "data", string.rep("x", 16), "source", "a" }
    local sizes = { 300, 311 + 2 * 64 }
    local many_cut, many_sizes = {}, { 0, 1100 * (1 + 64) }
    for i = 1, 64 do many_cut[2 * i - 1] = "h"; many_cut[2 * i] = "" end
    local function call(name, argv)
      local args = { "EVAL", script(name), 2, "s", "s:retry:g" }
      for _, a in ipairs(argv) do args[#args + 1] = a end
      for _, a in ipairs(LIMITS) do args[#args + 1] = a end
      return assert(srv:call(unpack(args)))
    end
    assert.same({ { "s", { { "1-1", cut, sizes }, { "1-2", { "data", "{}" } },
      { "1-3", many_cut, many_sizes } } } }, call("read", { "g", "c", 10 }))
    local own = call("own", { "g", "c", 10, "0-0", "0-0" })[2][1][2]
    assert.same({ "1-1", cut, 0, 0, sizes }, { own[1][1], own[1][2], 0, 0, own[1][5] })
    assert.equal(4, #own[2])
    assert.same({ "1-3", many_cut, many_sizes }, { own[3][1], own[3][2], own[3][5] })
    local claimed = call("claim", { "g", "c2", 0, 10 })[2][1][2]
    assert.same({ "1-1", cut, sizes }, { claimed[1][1], claimed[1][2], claimed[1][5] })
    assert.equal(4, #claimed[2])
    assert.same({ "1-3", many_cut, many_sizes }, { claimed[3][1], claimed[3][2], claimed[3][5] })
    local reclaimed = call("reclaim", { "g", "c3", 0, 10, "0-0", "0-0" })[2][1][2]
    assert.same({ "1-1", cut, sizes }, { reclaimed[1][1], reclaimed[1][2], reclaimed[1][5] })
    assert.equal(4, #reclaimed[2])
    assert.same({ "1-3", many_cut, many_sizes }, { reclaimed[3][1], reclaimed[3][2], reclaimed[3][5] })
  end)
end)
