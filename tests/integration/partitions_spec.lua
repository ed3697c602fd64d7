-- Partitioned streams against a real redis-server: `luastream publish
-- --partitions N --key K` adds to STREAM:{crc16(K) % N} (computed here with a
-- CRC-16/XMODEM of the spec's own), a host with a partitioned handler
-- handles every partition and leaves nothing pending on any, and after a
-- SIGKILL a second host's claiming read takes over what the first left
-- pending, partition by partition.
local helper = require "tests.integration.helper"

local READY = 'msg="host ready"'

-- Waits until group g holds nothing pending on partition p of orders.
local function wait_none_pending(srv, p)
  helper.wait_until(function()
    local ids = srv:pending_ids("orders:{" .. p .. "}", "g")
    return #ids == 0, #ids .. " pending on orders:{" .. p .. "}"
  end, 10, "nothing pending on partition " .. p)
end

local crc16 = require "tests.integration.support.crc16"

-- Records each entry in seen:{p} (a key in its partition's slot) as
-- "key seq partition stream deliveries".
local RECORD = [[
local ls = require "luastream"
return {
  stream = "orders", group = "g", start = "beginning", partitions = %d, workers = 4, by_key = true,%s
  handle = function(msg, ctx)
    ctx:write("RPUSH", "seen:" .. ctx.partition_tag, table.concat({
      ctx.headers[ls.PARTITION_KEY_HEADER], msg.seq, ctx.partition, ctx.stream, ctx.deliveries }, " "))
  end,
}
]]

-- Takes entries and never finishes them (reading `new`: a claiming read
-- would claim its own long-running entries back, counting deliveries).
local STUCK = [[
local ls = require "luastream"
return {
  stream = "orders", group = "g", start = "beginning", partitions = 4, workers = 64,
  handle = function(msg, ctx)
    ls.log.info("started", { seq = msg.seq })
    ls.sleep(600000)
  end,
}
]]

-- Rejects while the key "mode" says so, else records as RECORD does.
local REJECTING = [[
local ls = require "luastream"
return {
  stream = "orders", group = "g", start = "beginning", partitions = 4, dead_letter = "orders.dead",
  handle = function(msg, ctx)
    if ls.redis.call("GET", "mode") == "reject" then return ls.reject("not now") end
    ctx:write("RPUSH", "seen:" .. ctx.partition_tag, table.concat({
      ctx.headers[ls.PARTITION_KEY_HEADER], msg.seq, ctx.partition, ctx.stream, ctx.deliveries }, " "))
  end,
}
]]

local function seen(srv, p)
  local out = {}
  for i, line in ipairs(assert(srv:call("LRANGE", "seen:{" .. p .. "}", "0", "-1"))) do
    local key, seq, part, stream, deliveries = line:match("^(%S+) (%S+) (%S+) (%S+) (%S+)$")
    out[i] = { key = key, seq = tonumber(seq), partition = tonumber(part), stream = stream,
               deliveries = tonumber(deliveries) }
  end
  return out
end

local function publish(srv, n, key, seq)
  local code, out, err = helper.luastream("publish", "--redis", srv.url, "--partitions", tostring(n),
    "--key", key, "orders", '{"seq":' .. seq .. '}')
  assert(code == 0, "publish failed: " .. out .. err)
  return helper.trim(out)
end

local function total_seen(srv, n)
  local total = 0
  for p = 0, n - 1 do total = total + assert(srv:call("LLEN", "seen:{" .. p .. "}")) end
  return total
end

describe("partitioned streams", function()
  after_each(helper.cleanup)

  it("are published where crc16(key) % N says, and handled on every partition", function()
    local srv = helper.redis_start()
    local N, KEYS, PER_KEY = 16, 40, 3
    assert.equal(0x31C3, crc16("123456789"))
    local expect, later = {}, {}
    for seq = 1, PER_KEY do
      for k = 1, KEYS do
        local key = "acct-" .. k
        local p = crc16(key) % N
        expect[p] = (expect[p] or 0) + 1
        if seq == 1 then
          -- luastream publish picks the partition...
          local id = publish(srv, N, key, seq)
          local e = srv:xrange("orders:{" .. p .. "}", id, id)[1]
          assert.is_not_nil(e, "entry " .. id .. " of " .. key .. " not in orders:{" .. p .. "}")
          assert.equal(key, e.fields["partition-key"])
        else
          -- ...as any producer would (later entries of a key: one redis-cli)
          later[#later + 1] = { "XADD", "orders:{" .. p .. "}", "*", "data", '{"seq":' .. seq .. '}',
                                "partition-key", key }
        end
      end
    end
    srv:pipe(later)
    for p = 0, N - 1 do assert.equal(expect[p] or 0, srv:xlen("orders:{" .. p .. "}")) end
    assert.equal(0, srv:xlen("orders"))
    -- Without a key there is no partition to pick.
    local code, _, err = helper.luastream("publish", "--redis", srv.url, "--partitions", "16", "orders", "{}")
    assert.equal(2, code)
    assert.matches("--partitions needs --key", err, 1, true)

    local host = helper.host_start({}, { server = srv,
      dir = helper.handlers_dir({ ["orders.lua"] = RECORD:format(N, "") }) })
    host:wait_log(READY, 20, { plain = true })
    helper.wait_until(function()
      local n = total_seen(srv, N)
      return n == KEYS * PER_KEY, n .. " handled"
    end, 30, "every entry handled")
    for p = 0, N - 1 do
      local last = {}
      for _, s in ipairs(seen(srv, p)) do
        assert.equal(p, s.partition)
        assert.equal(p, crc16(s.key) % N)
        assert.equal("orders:{" .. p .. "}", s.stream)
        assert.equal((last[s.key] or 0) + 1, s.seq) -- per-key order
        last[s.key] = s.seq
      end
      wait_none_pending(srv, p)
    end
    assert.equal(0, host:stop())
  end)

  it("recover per partition: a claiming host takes over what a killed one left pending", function()
    local srv = helper.redis_start()
    local N, TOTAL = 4, 24
    local a = helper.host_start({}, { server = srv, dir = helper.handlers_dir({ ["orders.lua"] = STUCK }) })
    a:wait_log(READY, 20, { plain = true })
    local per = {}
    for i = 1, TOTAL do
      local key = "k" .. i
      publish(srv, N, key, 1)
      per[crc16(key) % N] = (per[crc16(key) % N] or 0) + 1
    end
    for p = 0, N - 1 do assert.is_true((per[p] or 0) > 0, "no key landed in partition " .. p) end
    a:wait_records({ msg = "started" }, TOTAL, 20, "every entry started on host A")
    for p = 0, N - 1 do
      assert.equal(per[p], #srv:pending_ids("orders:{" .. p .. "}", "g"))
    end
    a:signal("KILL")
    a:wait_exit(10)

    local b = helper.host_start({ "--instance", "2" }, { server = srv,
      dir = helper.handlers_dir({ ["orders.lua"] = RECORD:format(N,
        '\n  read = "claiming", claim_fallback = true, min_idle = "500ms",') }) })
    b:wait_log(READY, 20, { plain = true })
    helper.wait_until(function()
      local n = total_seen(srv, N)
      return n == TOTAL, n .. " recovered"
    end, 30, "every entry recovered by host B")
    for p = 0, N - 1 do
      local s = seen(srv, p)
      assert.equal(per[p], #s)
      for _, r in ipairs(s) do
        assert.equal(p, r.partition)
        assert.equal(p, crc16(r.key) % N)
        assert.is_true(r.deliveries >= 1, "a claimed entry counts its earlier delivery")
      end
      wait_none_pending(srv, p)
    end
    assert.equal(0, b:stop())
  end)

  it("dead-letter per partition, replay onto their own partition, and show in status one row each", function()
    local srv = helper.redis_start()
    local N = 4
    srv:cli("SET", "mode", "reject")
    local dir = helper.handlers_dir({ ["orders.lua"] = REJECTING })
    local host = helper.host_start({}, { server = srv, dir = dir })
    host:wait_log(READY, 20, { plain = true })
    local keys = {}
    for i = 1, 8 do
      keys[i] = "k" .. i
      publish(srv, N, keys[i], 1)
    end
    local per = {}
    for _, key in ipairs(keys) do per[crc16(key) % N] = (per[crc16(key) % N] or 0) + 1 end
    helper.wait_until(function()
      local n = 0
      for p = 0, N - 1 do n = n + srv:xlen("orders.dead:{" .. p .. "}") end
      return n == #keys, n .. " dead letters"
    end, 20, "every entry dead-lettered")
    for p = 0, N - 1 do
      assert.equal(per[p] or 0, srv:xlen("orders.dead:{" .. p .. "}"))
      for _, dl in ipairs(srv:xrange("orders.dead:{" .. p .. "}")) do
        assert.equal(p, crc16(dl.fields["partition-key"]) % N)
      end
    end
    assert.equal(0, srv:xlen("orders.dead"))

    local code, out = helper.luastream("status", "--redis", srv.url, dir)
    for p = 0, N - 1 do
      assert.matches("orders:{" .. p .. "}", out, 1, true)
    end
    assert.is_nil(out:find("orders%s+g"), "a row for the unpartitioned name:\n" .. out)
    assert.is_true(code == 0 or code == 1)

    srv:cli("SET", "mode", "accept")
    local replayed = 0
    for p = 0, N - 1 do
      if (per[p] or 0) > 0 then
        local rc, o, e = helper.luastream("dead-letters", "replay", "--redis", srv.url, dir, "orders.dead:{" .. p .. "}", "--all")
        assert.equal(0, rc, o .. e)
        replayed = replayed + per[p]
      end
    end
    assert.equal(#keys, replayed)
    helper.wait_until(function()
      local n = total_seen(srv, N)
      return n == #keys, n .. " handled after the replay"
    end, 20, "every replayed entry handled")
    for p = 0, N - 1 do
      for _, r in ipairs(seen(srv, p)) do
        assert.equal(p, r.partition)
        assert.equal("orders:{" .. p .. "}", r.stream)
      end
      assert.equal(0, #srv:pending_ids("orders:{" .. p .. "}:retry:g", "g"))
    end
    assert.equal(0, host:stop())
  end)
end)
