-- by_key under random keys and random handler durations on the paused clock:
-- each key's entries start in stream order and never two at once, every entry
-- is handled once, and keys are tied to no lane, so keys spread over every
-- lane (64 keys on 64 lanes drain about as fast as without by_key).
local testing = require "luastream.testing"

local DIR = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") .. "/fixtures/lanes_random"

-- Adds n entries to stream: a random key of nkeys (about one in ten without a
-- key when keyless), a random pause of 0 .. max_pause ms. Returns them by n.
local function publish(app, stream, n, nkeys, max_pause, keyless)
  local sent = {}
  for i = 1, n do
    local key = "k" .. math.random(1, nkeys)
    if keyless and math.random(10) == 1 then key = nil end
    local pause = math.random(0, max_pause)
    local body = string.format('{"n":%d,"pause_ms":%d%s}', i, pause,
      key and string.format(',"key":"%s"', key) or "")
    if key then
      app:command("XADD", stream, "*", "data", body, "partition-key", key)
    else
      app:command("XADD", stream, "*", "data", body)
    end
    sent[i] = { key = key, pause = pause }
  end
  return sent
end

-- Advances the clock 1 ms at a time until the file's handler has seen n
-- entries; returns the virtual ms it took.
local function drain(app, handler, n)
  local started = app:now()
  for _ = 1, 100000 do
    if #app:received(handler) >= n then break end
    app:advance(1)
  end
  return app:now() - started
end

-- The "started" records of one stream, in the order the handlers started.
local function starts(app, stream)
  local out = {}
  for _, r in ipairs(app:records("started")) do
    if r.stream == stream then out[#out + 1] = r end
  end
  return out
end

-- Every entry handled exactly once, acked, and each key's entries started in
-- publish order. Returns the most handlers seen running at once.
local function check(app, stream, sent)
  local got = app:received(stream)
  assert.equal(#sent, #got)
  local seen = {}
  for _, d in ipairs(got) do
    assert.equal("ack", d.outcome)
    assert.is_nil(seen[d.message.n], "entry " .. tostring(d.message.n) .. " handled twice")
    seen[d.message.n] = true
  end
  for i = 1, #sent do assert.is_true(seen[i], "entry " .. i .. " not handled") end
  assert.equal(0, #app:pending(stream, "g"))

  local last, most = {}, 0
  local list = starts(app, stream)
  assert.equal(#sent, #list)
  for _, r in ipairs(list) do
    local n, key = tonumber(r.n), r.key
    assert.equal(sent[n].key or "", key)
    if key ~= "" then
      assert(n > (last[key] or 0), "key " .. key .. ": entry " .. n .. " started after " .. tostring(last[key]))
      last[key] = n
    end
    most = math.max(most, tonumber(r.busy))
  end
  return most
end

describe("lanes by key, random keys and durations on the paused clock", function()
  local app
  after_each(function() if app then app:stop() end app = nil end)

  for seed = 1, 4 do
    it("keeps each key's order with many keys on few lanes (seed " .. seed .. ")", function()
      math.randomseed(seed)
      app = testing.app(DIR)
      local sent = publish(app, "few_lanes", 300, 40, 6, true)
      drain(app, "few_lanes", #sent)
      local most = check(app, "few_lanes", sent)
      assert.equal(3, most) -- every lane was used: 40 keys for 3 lanes
    end)

    it("keeps each key's order with few keys on many lanes (seed " .. seed .. ")", function()
      math.randomseed(100 + seed)
      app = testing.app(DIR)
      local sent = publish(app, "many_lanes", 300, 3, 6, true)
      drain(app, "many_lanes", #sent)
      local most = check(app, "many_lanes", sent)
      -- At most one per key, plus the keyless entries waiting for no one.
      assert(most >= 3, "only " .. most .. " at once")
    end)
  end

  it("uses every one of 64 lanes for 64 keys, draining about as fast as without by_key", function()
    math.randomseed(64)
    app = testing.app(DIR)
    -- 640 entries, 10 per key, 10 ms each: 100 ms of work per lane at best.
    local function publish_per_key(stream)
      local sent = {}
      for i = 1, 640 do
        local key = "acct-" .. ((i - 1) % 64)
        local body = string.format('{"n":%d,"pause_ms":10,"key":"%s"}', i, key)
        app:command("XADD", stream, "*", "data", body, "partition-key", key)
        sent[i] = { key = key }
      end
      return sent
    end
    local keyed = publish_per_key("wide_by_key")
    local by_key_ms = drain(app, "wide_by_key", 640)
    publish_per_key("wide_shared")
    local shared_ms = drain(app, "wide_shared", 640)
    assert.equal(64, check(app, "wide_by_key", keyed)) -- all 64 lanes at once
    assert(shared_ms >= 100, "without by_key: " .. shared_ms .. " ms")
    -- A fixed hash % 64 puts 4 keys on the busiest lane: 400 ms.
    assert(by_key_ms <= shared_ms * 1.1,
      "by_key took " .. by_key_ms .. " ms, without by_key " .. shared_ms .. " ms")
  end)
end)
