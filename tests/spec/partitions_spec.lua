-- Partitioned streams on the in-memory broker with the virtual clock: a
-- handler with `partitions = 4` reads orders:{0} .. orders:{3}; entries
-- published with a key land in partition crc16(key) % 4 and are handled
-- there, in order per key; a delay, a dead letter and a reply stay in their
-- partition's slot; an idle or a busy partition holds no other back; and
-- the fields are validated.
local testing = require "luastream.testing"
local handler = require "luastream.handler"

local SPEC_DIR = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")
local apps = dofile(SPEC_DIR .. "/support/apps.lua")(SPEC_DIR .. "/fixtures")
after_each(apps.stop_all)

local N = 4

local crc16 = require "tests.integration.support.crc16"

local function partition_of(key) return crc16(key) % N end

-- Keys "acct-1", ... whose partition is p, as many as wanted.
local function keys_in(p, count)
  local out, i = {}, 0
  while #out < count do
    i = i + 1
    if partition_of("acct-" .. i) == p then out[#out + 1] = "acct-" .. i end
  end
  return out
end

local function seen(app, p)
  local out = {}
  for i, line in ipairs(assert(app:command("LRANGE", "seen:{" .. p .. "}", "0", "-1"))) do
    local account, seq, part, stream = line:match("^(%S+) (%S+) (%S+) (%S+)$")
    out[i] = { account = account, seq = tonumber(seq), partition = tonumber(part), stream = stream }
  end
  return out
end

local function xlen(app, key) return assert(app:command("XLEN", key)) end

local function pending_count(app, key)
  local summary = assert(app:command("XPENDING", key, "g"))
  return summary[1]
end

describe("a partitioned handler", function()
  it("hashes like CRC-16/XMODEM: the check value and the harness's partition", function()
    assert.equal(0x31C3, crc16("123456789"))
    for i = 1, 50 do
      assert.equal(crc16("acct-" .. i) % 16, testing.partition("acct-" .. i, 16))
    end
  end)

  it("gets the entries of every partition, each handled in its own, in order per key", function()
    local app = apps.start("partitioned")
    local accounts = {}
    for i = 1, 12 do accounts[i] = "acct-" .. i end
    for seq = 1, 5 do
      for _, account in ipairs(accounts) do
        local _, p = app:publish("orders", { account = account, seq = seq }, { key = account, partitions = N })
        assert.equal(partition_of(account), p)
      end
    end
    local total, used = 0, {}
    for p = 0, N - 1 do
      assert.equal(pending_count(app, "orders:{" .. p .. "}"), 0)
      local last = {}
      for _, s in ipairs(seen(app, p)) do
        total = total + 1
        used[p] = true
        assert.equal(p, s.partition)
        assert.equal(p, partition_of(s.account))
        assert.equal("orders:{" .. p .. "}", s.stream)
        assert.equal((last[s.account] or 0) + 1, s.seq) -- per-key order
        last[s.account] = s.seq
      end
    end
    assert.equal(60, total)
    for p = 0, N - 1 do assert.is_true(used[p], "partition " .. p .. " got nothing") end
    assert.equal(0, xlen(app, "orders")) -- the unpartitioned name is not read nor written
  end)

  it("brings a retry_after back on its partition, through the partition's delay set", function()
    local app = apps.start("partitioned")
    local key = keys_in(2, 1)[1]
    app:publish("orders", { account = key, seq = 1, op = "later" }, { key = key, partitions = N })
    assert.equal(1, assert(app:command("ZCARD", "orders:{2}:delayed:g")))
    assert.same({}, seen(app, 2))
    app:advance("5s")
    local s = seen(app, 2)
    assert.equal(1, #s)
    assert.equal(key, s[1].account)
    assert.equal(0, assert(app:command("ZCARD", "orders:{2}:delayed:g")))
    assert.equal(0, pending_count(app, "orders:{2}"))
    for _, p in ipairs({ 0, 1, 3 }) do assert.same({}, seen(app, p)) end
  end)

  it("dead-letters to <dead_letter>:{p} and replies to <reply_to>:{p}", function()
    local app = apps.start("partitioned")
    local k1, k3 = keys_in(1, 1)[1], keys_in(3, 1)[1]
    app:publish("orders", { account = k1, seq = 1, op = "reject" }, { key = k1, partitions = N })
    app:publish("orders", { account = k3, seq = 1, op = "reply" }, { key = k3, partitions = N })
    assert.equal(1, xlen(app, "orders.dead:{1}"))
    assert.equal(0, xlen(app, "orders.dead"))
    assert.equal(1, xlen(app, "orders.out:{3}"))
    assert.equal(0, xlen(app, "orders.out"))
    assert.equal(0, pending_count(app, "orders:{1}"))
  end)

  it("runs a busy partition while others sit idle, and others while one is busy", function()
    local app = apps.start("partitioned")
    -- Both lanes of partition 0 sleep for 10 s ...
    local slow = keys_in(0, 2)
    for _, key in ipairs(slow) do
      app:publish("orders", { account = key, seq = 1, op = "slow" }, { key = key, partitions = N })
    end
    -- ... while partition 3 handles everything at once, without the clock moving.
    local fast = keys_in(3, 3)
    for seq = 1, 3 do
      for _, key in ipairs(fast) do
        app:publish("orders", { account = key, seq = seq }, { key = key, partitions = N })
      end
    end
    assert.equal(9, #seen(app, 3))
    assert.equal(0, #seen(app, 0))
    assert.equal(2, pending_count(app, "orders:{0}"))
    app:advance("10s")
    assert.equal(2, #seen(app, 0))
    assert.equal(0, pending_count(app, "orders:{0}"))
    assert.is_true((app:ready()))
  end)

  it("reloads every partition together: a new handle in place, a new N restarting them all", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p '" .. dir .. "'"))
    local function write(version, n)
      local f = assert(io.open(dir .. "/h.lua", "w"))
      f:write(string.format([[
return { stream = "orders", group = "g", partitions = %d,
  handle = function(msg, ctx) ctx:write("RPUSH", "v%d:" .. ctx.partition_tag, msg.account) end }
]], n, version))
      f:close()
    end
    write(1, N)
    local app = apps.keep(testing.app(dir))
    local keys = { keys_in(0, 1)[1], keys_in(3, 1)[1] }
    local function publish_all()
      for _, key in ipairs(keys) do app:publish("orders", { account = key }, { key = key, partitions = N }) end
    end
    publish_all()
    write(2, N)
    app:reload()
    publish_all()
    for _, p in ipairs({ 0, 3 }) do
      assert.equal(1, assert(app:command("LLEN", "v1:{" .. p .. "}")))
      assert.equal(1, assert(app:command("LLEN", "v2:{" .. p .. "}")))
    end
    write(3, 8) -- a new N: every partition's subscription stops, drains, and 8 start
    app:reload()
    assert.equal(N + 8, #app:records("subscription reading"))
    for p = 0, 7 do
      assert.is_not_nil(assert(app:command("XINFO", "GROUPS", "orders:{" .. p .. "}"))[1])
    end
    assert.is_true((app:ready()))
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("holds a lease per partition, and a second host with the same name stops with all of them", function()
    local first = apps.start("partitioned", { hostname = "box" })
    for p = 0, N - 1 do
      assert.matches(" box$", assert(first:command("GET", "luastream:consumer:{" .. p .. "}:orders:{" .. p .. "}:g:box-orders")))
    end
    local second = apps.start("partitioned", { hostname = "box", with = first })
    pcall(second.advance, second, "22s") -- the second host fails and stops
    local ready, why = second:ready()
    assert.is_false(ready)
    assert.matches("is in use by a live process", why, 1, true)
    local refused = first:records("consumer name in use by a live process")
    assert.equal(1, #refused) -- one partition's refusal stops the file: the others never log theirs
    assert.matches("^orders:{%d}$", refused[1].stream)
    assert.equal(N + 0, #first:records("subscription reading")) -- only the first host's
    local key = keys_in(1, 1)[1]
    first:publish("orders", { account = key, seq = 1 }, { key = key, partitions = N })
    assert.equal(1, #seen(first, 1), "the first runs on")
    local probe = apps.start("partitioned", { hostname = "probe", with = first })
    first:stop()
    for p = 0, N - 1 do -- every partition's lease given back on a clean stop
      assert.equal(0, probe:command("EXISTS", "luastream:consumer:{" .. p .. "}:orders:{" .. p .. "}:g:box-orders"))
    end
  end)

  it("is validated: partitions from 1 to 1024, no '{' in its names", function()
    local base = function(extra)
      local t = { stream = "orders", group = "g", handle = function() end }
      for k, v in pairs(extra) do t[k] = v end
      return t
    end
    assert.equal(16, handler.validate(base({ partitions = 16 }), "x.lua").partitions)
    assert.is_nil(handler.validate(base({}), "x.lua").partitions)
    for _, bad in ipairs({ 0, 1025, 2.5, "16" }) do
      local ok, err = pcall(handler.validate, base({ partitions = bad }), "x.lua")
      assert.is_false(ok)
      assert.matches("x.lua:%d+: field 'partitions' must be", err)
    end
    for _, field in ipairs({ "stream", "reply_to", "dead_letter" }) do
      local ok, err = pcall(handler.validate, base({ partitions = 4, [field] = "a{b}" }), "x.lua")
      assert.is_false(ok)
      assert.matches("field '" .. field .. "' must not hold '{' in a partitioned handler", err, 1, true)
    end
    assert.is_table(handler.validate(base({ stream = "a{b}" }), "x.lua")) -- unpartitioned: fine
  end)
end)
