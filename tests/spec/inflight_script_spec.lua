-- The max_in_flight semaphore's script (host/broker/scripts/inflight.lua),
-- on the in-memory broker and on a real redis-server: grants up to the cap,
-- grants a member already held again without counting it twice (a call
-- sent again after its answer was lost), gives free slots to the readers
-- that waited longest, renews, and drops what lapsed.
local testing = require "luastream.testing"
local helper = require "tests.integration.helper"

local HERE = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") .. "/fixtures"
local SCRIPT = helper.read_file("host/broker/scripts/inflight.lua")
local KEY, WAITING = "luastream:inflight:{s}:g", "luastream:inflight:{s}:g:waiting"

-- One call: o = {max, ttl, wait_ttl, waiter, holder, release = {}, renew = {}, want = {}}.
-- Returns renewed, granted, waiter.
local function slots(call, o)
  local release, renew, want = o.release or {}, o.renew or {}, o.want or {}
  local args = { "EVAL", SCRIPT, "2", KEY, WAITING, tostring(o.max or 2), tostring(o.ttl or 20000),
    tostring(o.wait_ttl or 2000), o.waiter or "", o.holder or "h", tostring(#release), tostring(#renew),
    tostring(#want) }
  for _, list in ipairs({ release, renew, want }) do
    for _, m in ipairs(list) do args[#args + 1] = m end
  end
  local out = assert(call(unpack(args)))
  return out[1], out[2], out[3]
end

local function cases(name, server)
  describe("the max_in_flight script on " .. name, function()
    local call, stop
    before_each(function() call, stop = server() end)
    after_each(function()
      stop()
      helper.cleanup()
    end)

    it("grants up to the cap and refuses the rest, the refused reader queued", function()
      local _, granted, waiter = slots(call, { max = 2, holder = "a", want = { "a#0", "a#1", "a#2" } })
      assert.same({ 1, 1, 0 }, granted)
      assert.matches("^%d+|a$", waiter)
      assert.equal(2, call("ZCARD", KEY))
      assert.equal(1, call("ZCARD", WAITING))
      assert.is_true(call("PTTL", KEY) > 0, "the slots' key expires with its last lease")
    end)

    it("grants a member already held again without counting it twice", function()
      slots(call, { max = 2, holder = "a", want = { "a#0" } })
      -- the answer was lost: the same call again
      local _, granted, waiter = slots(call, { max = 2, holder = "a", want = { "a#0" } })
      assert.same({ 1 }, granted)
      assert.equal("", waiter)
      assert.equal(1, call("ZCARD", KEY))
      local _, other = slots(call, { max = 2, holder = "b", want = { "b#0", "b#1" } })
      assert.same({ 1, 0 }, other)
    end)

    it("gives a freed slot to the reader that waited, not to the one that freed it", function()
      slots(call, { max = 1, holder = "a", want = { "a#0" } })
      local _, refused, wb = slots(call, { max = 1, holder = "b", want = { "b#0" } })
      assert.same({ 0 }, refused)
      -- a finishes and asks again in the same call: b waited first
      local _, again, wa = slots(call, { max = 1, holder = "a", release = { "a#0" }, want = { "a#1" } })
      assert.same({ 0 }, again)
      assert.is_true(wa > wb, "a queued behind b")
      local _, got, left = slots(call, { max = 1, holder = "b", waiter = wb, want = { "b#0" } })
      assert.same({ 1 }, got)
      assert.equal("", left, "b waits no more")
      local _, next = slots(call, { max = 1, holder = "a", waiter = wa, release = {}, want = { "a#1" } })
      assert.same({ 0 }, next, "the slot is b's")
      slots(call, { max = 1, holder = "b", release = { "b#0" } })
      local _, last = slots(call, { max = 1, holder = "a", waiter = wa, want = { "a#1" } })
      assert.same({ 1 }, last)
      assert.equal(0, call("ZCARD", WAITING))
    end)

    it("renews a held slot, takes a lapsed one again while there is room, and says when there is none", function()
      slots(call, { max = 1, holder = "a", want = { "a#0" } })
      local renewed = slots(call, { max = 1, holder = "a", renew = { "a#0" } })
      assert.same({ 1 }, renewed)
      call("ZREM", KEY, "a#0") -- lapsed
      assert.same({ 2 }, (slots(call, { max = 1, holder = "a", renew = { "a#0" } })))
      call("ZREM", KEY, "a#0")
      slots(call, { max = 1, holder = "b", want = { "b#0" } })
      assert.same({ 0 }, (slots(call, { max = 1, holder = "a", renew = { "a#0" } })))
      assert.same({ "b#0" }, call("ZRANGE", KEY, 0, -1))
    end)

    it("drops its place in the queue once it waits for nothing", function()
      slots(call, { max = 1, holder = "a", want = { "a#0" } })
      local _, _, wb = slots(call, { max = 1, holder = "b", want = { "b#0" } })
      assert.equal(1, call("ZCARD", WAITING))
      local _, _, left = slots(call, { max = 1, holder = "b", waiter = wb })
      assert.equal("", left)
      assert.equal(0, call("ZCARD", WAITING))
    end)
  end)
end

-- The per-key script (host/broker/scripts/inflight_keys.lua): one call,
-- several keys, each {release, renew, want}; returns per key {renewed, granted}.
local KEYS_SCRIPT = helper.read_file("host/broker/scripts/inflight_keys.lua")
local function key_slots(call, max, per_key)
  local args = { "EVAL", KEYS_SCRIPT, tostring(#per_key) }
  for _, k in ipairs(per_key) do args[#args + 1] = k.key end
  args[#args + 1] = tostring(max)
  args[#args + 1] = "20000"
  for _, k in ipairs(per_key) do
    local release, renew, want = k.release or {}, k.renew or {}, k.want or {}
    args[#args + 1] = tostring(#release)
    args[#args + 1] = tostring(#renew)
    args[#args + 1] = tostring(#want)
    for _, list in ipairs({ release, renew, want }) do
      for _, m in ipairs(list) do args[#args + 1] = m end
    end
  end
  return assert(call(unpack(args)))
end

local function key_cases(name, server)
  describe("the max_in_flight_per_key script on " .. name, function()
    local call, stop
    before_each(function() call, stop = server() end)
    after_each(function()
      stop()
      helper.cleanup()
    end)

    it("caps each key on its own, grants again what is held, and deletes a key with its last slot", function()
      local k1, k2 = KEY .. ":key:a", KEY .. ":key:b"
      local out = key_slots(call, 1, { { key = k1, want = { "h#0", "h#1" } }, { key = k2, want = { "h#0" } } })
      assert.same({ { {}, { 1, 0 } }, { {}, { 1 } } }, out)
      out = key_slots(call, 1, { { key = k1, want = { "h#0" } } }) -- the answer was lost: again
      assert.same({ { {}, { 1 } } }, out)
      assert.equal(1, call("ZCARD", k1))
      out = key_slots(call, 1, { { key = k1, want = { "g#0" } }, { key = k2, renew = { "h#0" } } })
      assert.same({ { {}, { 0 } }, { { 1 }, {} } }, out)
      key_slots(call, 1, { { key = k1, release = { "h#0" } } })
      assert.equal(0, call("EXISTS", k1))
      out = key_slots(call, 1, { { key = k1, want = { "g#0" } } })
      assert.same({ { {}, { 1 } } }, out)
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

describe("the max_in_flight script on the virtual clock", function()
  local app
  before_each(function() app = testing.app(HERE .. "/heartbeat_deleted", { version = "7.0.15" }) end)
  after_each(function() app:stop() end)
  local function call(...) return app:command(...) end

  it("drops slots and places whose lease lapsed", function()
    slots(call, { max = 1, ttl = 20000, holder = "a", want = { "a#0" } })
    local _, _, wb = slots(call, { max = 1, holder = "b", wait_ttl = 2000, want = { "b#0" } })
    app:advance(19000)
    local _, refused = slots(call, { max = 1, holder = "c", want = { "c#0" } })
    assert.same({ 0 }, refused, "a's slot is held; b's place lapsed, c is queued")
    app:advance(1001)
    local _, got = slots(call, { max = 1, holder = "b", waiter = wb, wait_ttl = 2000, want = { "b#0" } })
    assert.same({ 0 }, got, "a's slot lapsed, and c waits before b now")
    assert.equal(0, call("ZCARD", KEY))
  end)
end)

key_cases("the in-memory broker", function()
  local app = testing.app(HERE .. "/heartbeat_deleted", { version = "7.0.15" })
  return function(...) return app:command(...) end, function() app:stop() end
end)

key_cases("a real server", function()
  local srv = helper.redis_start()
  return function(...) return srv:call(...) end, function() end
end)
