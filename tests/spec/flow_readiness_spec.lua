-- Readiness of flow control (docs/operations.md, /readyz): a limiter or a
-- slots call that the server keeps refusing stops a subscription's work as
-- surely as a stuck read, so /readyz turns unready naming it (the rate
-- limit's permits, rate_per_key's permits, the max_in_flight slots, the
-- max_in_flight_per_key slots), its key and the error, once it has failed
-- for as long as a stuck read may wait; ready again once it works. The
-- limiter's key holding the wrong type makes its script fail. On the
-- in-memory broker with the virtual clock.

local SPEC_DIR = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")
local apps = dofile(SPEC_DIR .. "/support/apps.lua")(SPEC_DIR .. "/fixtures")
local start = apps.start

local function count(app, msg)
  local n = 0
  for _, line in ipairs(app:logs()) do
    if line:find('msg="' .. msg .. '"', 1, true) then n = n + 1 end
  end
  return n
end

-- key holds a hash: the limiter's or the slots' script fails on it
-- (WRONGTYPE) until it is deleted.
local function spoil(app, key)
  app:command("DEL", key)
  assert(app:command("HSET", key, "not", "a limiter"))
end

-- Unready within 20 s of virtual time, naming the work: returns the reason.
local function unready(app, work)
  for _ = 1, 20 do
    app:advance(1000)
    local ok, why = app:ready()
    if not ok then
      assert.matches("stuck: " .. work:gsub("%p", "%%%0") .. " failing for %d+ ms: ", why)
      return why
    end
  end
  error(work .. ": still ready after 20 s of failures")
end

describe("readiness while flow control fails", function()
  after_each(apps.stop_all)

  it("is lost while the rate limit's permits are refused, and back once they come", function()
    local app = start("rate_field")
    for n = 1, 5 do app:publish("jobs", { n = n }) end
    app:settle()
    assert.is_true(app:ready())
    local key = "luastream:rate:{jobs}:work"
    spoil(app, key)
    app:advance(2000)
    assert.is_true(app:ready(), "not at the first failure: only as long as a stuck read")
    local why = unready(app, "the rate limit's permits")
    assert.matches("EVAL (rate) on " .. key .. ": ", why, 1, true)
    assert.matches("WRONGTYPE", why, 1, true)
    -- logged once at its level, not at every retry
    assert.equal(1, count(app, "rate limit: taking permits failed, reading waits"))

    local before = #app:received("jobs")
    assert(app:command("DEL", key))
    app:advance(2000)
    assert.is_true(app:ready())
    assert.is_true(#app:received("jobs") > before, "reading goes on")
    assert.equal(1, count(app, "the rate limit's permits works again"))
  end)

  it("is lost while rate_per_key's permits for a key are refused, naming the key", function()
    local app = start("rate_per_key")
    app:settle()
    local key = "luastream:rate:{jobs}:work:key:busy"
    spoil(app, key)
    for n = 1, 3 do app:publish("jobs", { n = n }, { key = "busy" }) end
    app:publish("jobs", { n = 0 }) -- no key: not held up
    app:settle()
    assert.equal(1, #app:received("jobs"))
    local why = unready(app, "rate_per_key's permits")
    assert.matches("EVAL (rate_per_key) on " .. key .. ": ", why, 1, true)
    assert.matches("WRONGTYPE", why, 1, true)
    local line
    for _, l in ipairs(app:logs()) do
      if l:find("rate_per_key: taking permits failed", 1, true) then line = line or l end
    end
    assert.matches('key="?' .. key:gsub("%p", "%%%0"), line)

    assert(app:command("DEL", key))
    app:advance(2000)
    assert.is_true(app:ready())
    assert.equal(4, #app:received("jobs"))
  end)

  it("names the prefix of rate_per_key's keys when a call for several is refused", function()
    local app = start("rate_per_key")
    app:settle()
    spoil(app, "luastream:rate:{jobs}:work:key:a")
    -- in one command, so that one read brings both and one call asks for both
    app:command("EVAL", "redis.call('XADD', 'jobs', '*', 'data', '{}', 'partition-key', 'a') " ..
                "redis.call('XADD', 'jobs', '*', 'data', '{}', 'partition-key', 'b') return 1", "0")
    local why = unready(app, "rate_per_key's permits")
    assert.matches("EVAL (rate_per_key) on 2 keys under luastream:rate:{jobs}:work: ", why, 1, true)
    local found = false
    for _, l in ipairs(app:logs()) do
      found = found or (l:find("rate_per_key: taking permits failed", 1, true) ~= nil and
        l:find("key_prefix=", 1, true) ~= nil)
    end
    assert.is_true(found, "the log says key_prefix=")
    assert(app:command("DEL", "luastream:rate:{jobs}:work:key:a"))
    app:advance(2000)
    assert.is_true(app:ready())
    assert.equal(2, #app:received("jobs"))
  end)

  it("is lost while the max_in_flight slots are refused, and back once they come", function()
    local app = start("max_in_flight")
    app:settle()
    local key = "luastream:inflight:{jobs}:workers"
    spoil(app, key)
    app:publish("jobs", { n = 1, ms = 10 })
    local why = unready(app, "the max_in_flight slots")
    assert.matches("EVAL (max_in_flight) on " .. key .. ": ", why, 1, true)
    assert(app:command("DEL", key))
    app:advance(2000)
    assert.is_true(app:ready())
    assert.equal(1, #assert(app:command("LRANGE", "finished", 0, -1)))
  end)

  it("is lost while the max_in_flight_per_key slots are refused, naming the key", function()
    local app = start("max_in_flight_per_key")
    app:settle()
    local key = "luastream:inflight:{jobs}:workers:key:busy"
    spoil(app, key)
    app:publish("jobs", { n = 1, ms = 10 }, { key = "busy" })
    local why = unready(app, "the max_in_flight_per_key slots")
    assert.matches("EVAL (max_in_flight_per_key) on " .. key .. ": ", why, 1, true)
    assert(app:command("DEL", key))
    app:advance(2000)
    assert.is_true(app:ready())
    assert.equal(1, #assert(app:command("LRANGE", "finished", 0, -1)))
  end)
end)
