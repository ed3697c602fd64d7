-- A handler's `memory` on the in-process harness (virtual clock): a state
-- that goes past its limit fails the delivery that ran and every other
-- entry running on it with reason memory, and the handler goes on in a
-- fresh state of the version it was running, not the file as it is now.
local testing = require "luastream.testing"

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

local function tempdir()
  local path = os.tmpname()
  os.remove(path)
  assert(os.execute("mkdir -p '" .. path .. "'"))
  return path
end

-- {grow = true} fills a table the state keeps until allocation fails (a
-- pcall in the handler catches that, and the delivery fails all the same);
-- {nap = true} sleeps a second first ({fail = true}: then raises); anything else logs what the state
-- kept and which text of the file ran.
local function grower(mark, extra)
  return string.format([[
local ls = require "luastream"
local keep = {}
return {
  stream = "big", group = "g", workers = 4, memory = 8 * 1024 * 1024, %s
  handle = function(msg)
    if msg.grow then
      local ok, err = pcall(function()
        while true do keep[#keep + 1] = string.rep("x", 200) .. #keep end
      end)
      ls.log.info("caught", { err = tostring(err) })
      return
    end
    if msg.nap then ls.sleep(1000) end
    if msg.fail then error("failed after its nap") end
    ls.log.info("small", { kept = #keep, mark = %q, n = msg.n })
  end,
}
]], extra or "", mark)
end

local function by_id(list)
  local out = {}
  for _, d in ipairs(list) do out[d.id] = d end
  return out
end

describe("a handler's memory limit", function()
  local dir, app
  before_each(function() dir = tempdir() end)
  after_each(function()
    if app then app:stop() end
    app = nil
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("fails the delivery and the entries running beside it with reason memory, in a fresh state after", function()
    write(dir .. "/grow.lua", grower("one"))
    app = testing.app(dir, { handler_errors = "record" })
    local nap1 = app:publish("big", { nap = true })
    local nap2 = app:publish("big", { nap = true })
    local grow = app:publish("big", { grow = true })
    local got = by_id(app:received("grow"))
    for _, id in ipairs({ nap1, nap2, grow }) do
      assert.equal("error", got[id].outcome, id)
      assert.equal("memory", got[id].reason, id)
    end
    assert.truthy(got[grow].error:find("went past its memory limit (memory = 8388608 bytes) while this entry ran",
      1, true), got[grow].error)
    assert.truthy(got[nap1].error:find("while entry " .. grow .. " ran beside this one", 1, true), got[nap1].error)
    local past = app:records("handler state went past its memory limit: the entries running on it fail, " ..
      "a fresh state of the same version takes over")
    assert.equal(1, #past)
    assert.equal(grow, past[1].id)
    assert.equal("3", past[1].failed)
    assert.equal("8388608", past[1].limit)
    -- The sleepers' timers went with them: nothing wakes up later.
    app:advance("2s")
    assert.equal(3, #app:received("grow"))
    assert.equal(0, #app:records("small"))
    -- The file changes on disk, and no reload comes: the fresh state runs the
    -- version that was running.
    local version = got[grow].version
    write(dir .. "/grow.lua", grower("two"))
    local later = app:publish("big", { n = 1 })
    local small = app:records("small")
    assert.equal(1, #small)
    assert.equal("0", small[1].kept)
    assert.equal("one", small[1].mark)
    assert.equal(version, by_id(app:received("grow"))[later].version)
    -- Failed, not acked: on `new` they stay pending (max_deliveries counts them).
    assert.equal(3, #app:pending("big", "g"))
  end)

  it("dead-letters with reason memory at the last delivery max_deliveries allows", function()
    write(dir .. "/grow.lua", grower("one", 'max_deliveries = 1, dead_letter = "big.dead",'))
    app = testing.app(dir, { handler_errors = "record" })
    local id = app:publish("big", { grow = true })
    local dead = app:entries("big.dead")
    assert.equal(1, #dead)
    assert.equal("memory", dead[1].fields["dead-letter-reason"])
    assert.equal(id, dead[1].fields["dead-letter-id"])
    assert.equal(0, #app:pending("big", "g"))
    app:publish("big", { n = 2 })
    assert.equal("0", app:records("small")[1].kept)
  end)

  -- The sleeper finishes from its timer (returning or raising); its done
  -- callback starts the grower (one worker), which goes past the limit before
  -- the sleeper's finish is over: the sleeper is no longer running then, and
  -- its outcome is carried out once.
  for _, case in ipairs({ { fail = false, outcome = "ack" }, { fail = true, outcome = "error" } }) do
    it("leaves an entry that just finished out of the failure of the one its done started (fail = "
      .. tostring(case.fail) .. ")", function()
      write(dir .. "/grow.lua", grower("one", 'workers = 1, max_deliveries = 1, dead_letter = "big.dead",'))
      app = testing.app(dir, { handler_errors = "record" })
      local nap = app:publish("big", { nap = true, fail = case.fail or nil })
      local grow = app:publish("big", { grow = true })
      local after = app:publish("big", { n = 3 })
      assert.equal(0, #app:received("grow"))
      app:advance("1s")
      local got = app:received("grow")
      assert.equal(3, #got)
      local by = by_id(got)
      assert.equal(case.outcome, by[nap].outcome)
      if case.fail then
        assert.equal("handler-error", by[nap].reason)
        assert.truthy(by[nap].error:find("failed after its nap", 1, true), by[nap].error)
      end
      assert.equal("error", by[grow].outcome)
      assert.equal("memory", by[grow].reason)
      assert.truthy(by[grow].error:find("while this entry ran", 1, true), by[grow].error)
      assert.equal("ack", by[after].outcome)
      local past = app:records("handler state went past its memory limit: the entries running on it fail, " ..
        "a fresh state of the same version takes over")
      assert.equal(1, #past)
      assert.equal(grow, past[1].id)
      assert.equal("1", past[1].failed)
      local dead = {}
      for _, d in ipairs(app:entries("big.dead")) do dead[d.fields["dead-letter-id"]] = d end
      assert.equal("memory", dead[grow].fields["dead-letter-reason"])
      assert.equal(case.fail and "handler-error" or nil, dead[nap] and dead[nap].fields["dead-letter-reason"])
      assert.equal(case.fail and 2 or 1, #app:entries("big.dead"))
      assert.equal(0, #app:pending("big", "g"))
      local small = app:records("small")
      assert.equal(case.fail and 1 or 2, #small)
      assert.equal("0", small[#small].kept)
    end)
  end

  it("takes a new memory on reload without restarting the subscription", function()
    write(dir .. "/grow.lua", grower("one"))
    app = testing.app(dir, { handler_errors = "record" })
    write(dir .. "/grow.lua", (grower("one", "memory = 12 * 1024 * 1024,"):gsub("memory = 8 %* 1024 %* 1024, ", "")))
    app:reload()
    assert.equal(1, #app:records("handler reloaded"))
    assert.equal(0, #app:records("handler reloaded, restarting its subscription"))
    app:publish("big", { grow = true })
    local past = app:records("handler state went past its memory limit: the entries running on it fail, " ..
      "a fresh state of the same version takes over")
    assert.equal(tostring(12 * 1024 * 1024), past[1].limit)
  end)

  it("refuses a file whose top level holds more than its memory", function()
    write(dir .. "/big.lua", [[
local t = {}
for i = 1, 60000 do t[i] = string.rep("y", 100) .. i end
return { stream = "big", group = "g", memory = 4 * 1024 * 1024, handle = function() end }
]])
    local ok, err = pcall(testing.app, dir)
    assert.is_false(ok)
    assert.truthy(err:find(dir .. "/big.lua: holds %d+ bytes once loaded, more than its field 'memory' allows %(4194304 bytes%)"),
      err)
  end)

  it("validates the field: a number of bytes in range", function()
    local validate = require("luastream.handler").validate
    local base = { stream = "s", group = "g", handle = function() end }
    assert.equal(256 * 1024 * 1024, validate(base, "h.lua").memory)
    for _, bad in ipairs({ "256MB", 1000, 2 ^ 41, 4194304.5, true }) do
      local t = { memory = bad }
      for k, v in pairs(base) do t[k] = v end
      local ok, err = pcall(validate, t, "h.lua", "return {\n memory = x,\n}")
      assert.is_false(ok)
      assert.truthy(err:find("h.lua:2: field 'memory' must be a number of bytes from 4194304 to 1099511627776", 1, true),
        err)
    end
  end)
end)
