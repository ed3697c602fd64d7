-- The heartbeat's part of SCRIPT_KEEPALIVE (host/broker/scripts/keepalive.lua), on the
-- in-memory broker and on a real redis-server: of the ids a consumer holds,
-- it re-stamps exactly those still pending for it and still in the stream
-- (the delivery counts as they were), whatever else the consumer has
-- pending, however the ids compare as strings, and given in any order.
local testing = require "luastream.testing"
local helper = require "tests.integration.helper"

local HERE = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") .. "/fixtures"
local SCRIPT = helper.read_file("host/broker/scripts/keepalive.lua")
local LONG_AGO = 100000 -- ms: the idle time every pending entry starts from (ADD_AND_READ)

-- Adds the ids (explicit, ascending) to stream s; reads them all as "me".
local ADD_AND_READ = [[
for _, id in ipairs(ARGV) do redis.call('XADD', KEYS[1], id, 'n', id) end
redis.call('XGROUP', 'CREATE', KEYS[1], 'g', '0')
redis.call('XREADGROUP', 'GROUP', 'g', 'me', 'COUNT', #ARGV, 'STREAMS', KEYS[1], '>')
local p = redis.call('XPENDING', KEYS[1], 'g', '-', '+', #ARGV)
for _, e in ipairs(p) do redis.call('XCLAIM', KEYS[1], 'g', e[2], 0, e[1], 'IDLE', 100000, 'JUSTID') end
return #p
]]

-- The pending entries of s by id: {owner, idle, count}.
local function pending(call)
  local out = {}
  for _, e in ipairs(assert(call("XPENDING", "s", "g", "-", "+", 10000))) do
    out[e[1]] = { owner = e[2], idle = tonumber(e[3]), count = tonumber(e[4]) }
  end
  return out
end

-- A heartbeat's section on its own (no lease to renew or check): its
-- re-stamped counts per key.
local function beat(call, ids)
  local args = { "EVAL", SCRIPT, "2", "s", "s-retry", "", "0", "0", "1", "0", "g", "me", "2", tostring(#ids) }
  for _, id in ipairs(ids) do args[#args + 1] = id end
  args[#args + 1] = "0"
  local out = assert(call(unpack(args)))
  assert.same({}, out[1]) -- no lease
  return out[2][1]
end

-- Ids ascending as numbers, not as strings (1-10 after 1-9, 10-0 after 9-10).
local IDS = { "1-0", "1-1", "1-2", "1-9", "1-10", "1-11", "2-0", "9-0", "9-10", "10-0", "10-5", "99-0",
  "100-0", "100-1", "100-10", "100-100", "1000-0", "10000-1" }
-- Held by "me"; the others ("1-9", "99-0", "1000-0") are pending for it, not held.
local HELD = { "1-0", "1-1", "1-2", "1-10", "1-11", "2-0", "9-0", "9-10", "10-0", "10-5", "100-0", "100-1",
  "100-10", "100-100", "10000-1" }
-- Of those: taken by another consumer, acked, deleted, trimmed away.
local TAKEN = { "1-2", "10-0", "100-1" }
local EXPECTED = { "1-1", "1-10", "1-11", "2-0", "9-0", "100-0", "100-100", "10000-1" }

-- Sets up IDS as above on the server of call.
local function setup(call)
  assert.equal(#IDS, call("EVAL", ADD_AND_READ, "1", "s", unpack(IDS)))
  for _, id in ipairs(TAKEN) do -- another consumer's now, idle as long
    assert.same({ id }, call("XCLAIM", "s", "g", "other", "0", id, "IDLE", tostring(LONG_AGO), "JUSTID"))
  end
  assert.equal(1, call("XACK", "s", "g", "9-10"))
  assert.equal(2, call("XDEL", "s", "10-5", "100-10"))
  assert.equal(1, call("XTRIM", "s", "MINID", "1-1"))
end

local function set(list)
  local s = {}
  for _, v in ipairs(list) do s[v] = true end
  return s
end

-- What the beat changed: ids re-stamped (idle now low), and that nothing
-- else did (owner, count, still pending).
local function stamped_ids(before, after)
  local out = {}
  for id, b in pairs(before) do
    local a = after[id]
    assert.is_truthy(a, id .. " no longer pending")
    assert.equal(b.owner, a.owner, id .. "'s owner")
    assert.equal(b.count, a.count, id .. "'s delivery count")
    if a.idle < LONG_AGO / 2 then out[#out + 1] = id end
  end
  for id in pairs(after) do assert.is_truthy(before[id], id .. " pending after, not before") end
  table.sort(out, function(x, y) return helper.id_cmp(x, y) < 0 end)
  return out
end

-- server() gives a command function and a function that stops the server.
local function cases(name, server)
  describe("the heartbeat script on " .. name, function()
    local call, stop
    before_each(function() call, stop = server() end)
    after_each(function()
      stop()
      helper.cleanup()
    end)

    it("re-stamps exactly the held ids still pending for the consumer and still in the stream", function()
      setup(call)
      local before = pending(call)
      assert.same({ #EXPECTED, 0 }, beat(call, HELD))
      assert.same(EXPECTED, stamped_ids(before, pending(call)))
    end)

    it("never re-stamps another consumer's id or a deleted one when the ids come out of order", function()
      setup(call)
      local before = pending(call)
      local shuffled = {} -- the even places, then the odd ones
      for i = 2, #HELD, 2 do shuffled[#shuffled + 1] = HELD[i] end
      for i = 1, #HELD, 2 do shuffled[#shuffled + 1] = HELD[i] end
      local n = beat(call, shuffled)[1]
      local got = stamped_ids(before, pending(call))
      assert.equal(n, #got)
      local ok = set(EXPECTED)
      for _, id in ipairs(got) do assert.is_true(ok[id], id .. " re-stamped") end
    end)

    it("finds its ids among many more of its own pending entries it does not hold", function()
      local all, held = {}, {}
      for i = 1, 500 do all[i] = i .. "-0" end
      assert.equal(500, call("EVAL", ADD_AND_READ, "1", "s", unpack(all)))
      for i = 1, 500, 10 do held[#held + 1] = all[i] end
      held[#held + 1] = "500-0"
      local before = pending(call)
      assert.same({ #held, 0 }, beat(call, held))
      local want = {}
      for _, id in ipairs(held) do want[#want + 1] = id end
      table.sort(want, function(x, y) return helper.id_cmp(x, y) < 0 end)
      assert.same(want, stamped_ids(before, pending(call)))
    end)

    it("re-stamps all of 2,500 held ids, over several pages and XCLAIM calls", function()
      local all, held = {}, {}
      for i = 1, 2600 do all[i] = "5-" .. i end
      assert.equal(2600, call("EVAL", ADD_AND_READ, "1", "s", unpack(all)))
      for i = 1, 2500 do held[i] = all[i] end
      local before = pending(call)
      assert.same({ 2500, 0 }, beat(call, held))
      local got = stamped_ids(before, pending(call))
      assert.equal(2500, #got)
      assert.equal("5-1", got[1])
      assert.equal("5-2500", got[2500])
    end)

    it("leaves every id of a stream emptied by a trim", function()
      assert.equal(3, call("EVAL", ADD_AND_READ, "1", "s", "1-0", "2-0", "3-0"))
      assert.equal(3, call("XTRIM", "s", "MAXLEN", "0"))
      local before = pending(call)
      assert.same({ 0, 0 }, beat(call, { "1-0", "2-0", "3-0" }))
      assert.same({}, stamped_ids(before, pending(call)))
    end)

    -- The keepalive's call: leases renewed, then each rider's section.
    local LEASE = "luastream:consumer:{s}:g:me"
    local function keepalive(leases, riders)
      local keys, argv = {}, { "tok 1 m h", "20000", tostring(#leases), tostring(#riders) }
      for _, k in ipairs(leases) do keys[#keys + 1] = k end
      for _, r in ipairs(riders) do
        keys[#keys + 1] = LEASE
        keys[#keys + 1] = r.stream
        keys[#keys + 1] = r.stream .. "-retry"
        for _, v in ipairs({ "1", r.group, "me", "2", tostring(#r.ids) }) do argv[#argv + 1] = v end
        for _, id in ipairs(r.ids) do argv[#argv + 1] = id end
        argv[#argv + 1] = "0"
      end
      local args = { "EVAL", SCRIPT, tostring(#keys) }
      for _, k in ipairs(keys) do args[#args + 1] = k end
      for _, v in ipairs(argv) do args[#args + 1] = v end
      return assert(call(unpack(args)))
    end

    it("renews the leases and carries every rider in one call; a rider's error is its own", function()
      setup(call)
      assert.equal("OK", call("SET", LEASE, "tok 1 m h"))
      assert.equal("OK", call("SET", "luastream:consumer:{s}:g2:me", "another 2 m h"))
      local before = pending(call)
      -- the first rider's group does not exist (NOGROUP), nor its stream
      local out = keepalive({ LEASE, "luastream:consumer:{s}:g2:me", "luastream:consumer:{s}:g3:me" }, {
        { stream = "s", group = "gone", ids = { "1-1" } },
        { stream = "s", group = "g", ids = HELD },
      })
      assert.same({ 1, "another 2 m h", 2 }, out[1])
      assert.equal("string", type(out[2][1]))
      assert.matches("NOGROUP", out[2][1])
      assert.same({ #EXPECTED, 0 }, out[2][2])
      assert.same(EXPECTED, stamped_ids(before, pending(call)))
      assert.is_true(call("PTTL", LEASE) > 10000)
      assert.equal("tok 1 m h", call("GET", "luastream:consumer:{s}:g3:me"))
      assert.equal("another 2 m h", call("GET", "luastream:consumer:{s}:g2:me"))
    end)

    it("re-stamps nothing for a rider whose lease another process holds", function()
      setup(call)
      assert.equal("OK", call("SET", LEASE, "another 2 m h"))
      local before = pending(call)
      local out = keepalive({}, { { stream = "s", group = "g", ids = HELD } })
      assert.same({}, out[1])
      assert.matches("not this process", out[2][1])
      assert.same({}, stamped_ids(before, pending(call)))
    end)
  end)
end

cases("the in-memory broker", function()
  local app = testing.app(HERE .. "/heartbeat_deleted", { version = "7.0.15" })
  return function(...) return app:command(...) end, function() app:stop() end
end)

cases("a real server", function()
  local srv = helper.redis_start()
  return function(...) return srv:call(...) end, function() end
end)

describe("the heartbeat script for a user not allowed XINFO STREAM", function()
  after_each(helper.cleanup)

  it("checks each id with XRANGE instead, and re-stamps the same ids", function()
    local srv = helper.redis_start()
    local call = function(...) return srv:call(...) end
    assert.equal("OK", srv:cli("ACL", "SETUSER", "default", "-xinfo|stream"))
    assert.is_nil(call("XINFO", "STREAM", "s"), "XINFO STREAM refused")
    setup(call)
    local before = pending(call)
    assert.same({ #EXPECTED, 0 }, beat(call, HELD))
    assert.same(EXPECTED, stamped_ids(before, pending(call)))
  end)
end)
