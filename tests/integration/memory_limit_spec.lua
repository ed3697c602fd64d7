-- A handler's memory (its `memory` field): past the limit the delivery
-- fails with reason memory and the handler goes on in a fresh state of the
-- same version while everything else keeps running; a malloc that fails
-- under the limit (the process as a whole out of memory: ulimit -v) ends
-- the process with status 70 naming the handler, never a host that lives
-- on doing nothing.
local helper = require "tests.integration.helper"

local READY = 'msg="host ready"'
local PAST = "handler state went past its memory limit: the entries running on it fail, a fresh state of the same version takes over"

-- grow.lua: {grow = true} grows a table the state keeps until allocation
-- fails, by small strings or by `step`; any other entry logs how much the
-- state kept and which file ran.
local SMALL = 'string.rep("x", 1000) .. #keep'
local function grower(fields, mark, step)
  return string.format([[
local ls = require "luastream"
local keep = {}
return {
  stream = "big", group = "g", %s
  handle = function(msg)
    if msg.grow then
      while true do keep[#keep + 1] = %s end
    end
    ls.log.info("small", { n = msg.n, kept = #keep, mark = %q })
  end,
}
]], fields, step or SMALL, mark)
end

local OTHER = [[
local ls = require "luastream"
return {
  stream = "s", group = "g",
  handle = function(msg) ls.log.info("other", { n = msg.n }) end,
}
]]

local function entry(srv, stream, json)
  return srv:cli("XADD", stream, "*", "data", json)
end

-- Whether the binary under test carries AddressSanitizer (./dev test).
local function sanitized(bin)
  local p = io.popen("ldd '" .. bin .. "' 2>/dev/null")
  local out = p:read("*a")
  p:close()
  return out:find("libasan", 1, true) ~= nil
end

describe("a handler's memory limit", function()
  after_each(helper.cleanup)

  it("fails the delivery with reason memory, renews the state and keeps the host running", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({
      ["grow.lua"] = grower('memory = 16 * 1024 * 1024, max_deliveries = 1, dead_letter = "big.dead", workers = 4,', "one"),
      ["other.lua"] = OTHER,
    })
    local host = helper.host_start({ "--http", "127.0.0.1:0" }, { server = srv, dir = dir })
    local port = helper.health_port(host)
    host:wait_log(READY, 20, { plain = true })
    local key = srv:cli("KEYS", "luastream:consumer:{big}:g:*"):match("[^\n]+")
    assert(key, "no lease of grow's consumer")

    local id = entry(srv, "big", '{"grow":true}')
    local past = host:wait_records({ msg = PAST }, 1, 20, "the limit reached")
    assert.equal("grow", past[1].handler)
    assert.equal(id, past[1].id)
    assert.equal(tostring(16 * 1024 * 1024), past[1].limit)
    local dead = host:wait_records({ msg = "entry dead-lettered" }, 1, 10, "the entry dead-lettered")
    assert.equal("memory", dead[1].reason)
    assert.equal(id, dead[1].id)
    helper.wait_until(function() return srv:xlen("big.dead") == 1 end, 10, "the dead letter")
    local letter = srv:xrange("big.dead")[1]
    assert.equal("memory", letter.fields["dead-letter-reason"])
    assert.equal(id, letter.fields["dead-letter-id"])
    assert.truthy(letter.fields["dead-letter-error"]:find("went past its memory limit", 1, true),
      letter.fields["dead-letter-error"])

    -- The next entry runs in a fresh state of the same version: the table is gone.
    entry(srv, "big", '{"n":1}')
    local small = host:wait_records({ msg = "small" }, 1, 10, "grow's next entry")
    assert.equal("0", small[1].kept)
    assert.equal("one", small[1].mark)
    -- The other handler, and the leases, carry on.
    entry(srv, "s", '{"n":2}')
    host:wait_records({ msg = "other", n = "2" }, 1, 10, "the other handler")
    local ttl = tonumber(srv:cli("PTTL", key))
    helper.wait_until(function() return tonumber(srv:cli("PTTL", key)) > ttl end, 10, "a lease renewal")
    assert.equal(200, (helper.http_get(port, "/readyz")))
    local code, metrics = helper.http_get(port, "/metrics")
    assert.equal(200, code)
    assert.truthy(metrics:find('luastream_dead_letters_total{handler="grow",stream="big",group="g",reason="memory"} 1',
      1, true), metrics)
    assert.is_true(host:alive())
    assert.same({}, (srv:pending_ids("big", "g")))
    assert.equal(0, host:stop(10))
  end)

  it("carries out the outcome of an entry that finished once when the next one, started by its end, goes past the limit", function()
    local srv = helper.redis_start()
    -- One worker: the sleeper's end starts the grower, which goes past the
    -- limit while the sleeper's finish is still under way.
    local dir = helper.handlers_dir({
      ["grow.lua"] = [[
local ls = require "luastream"
local keep = {}
return {
  stream = "big", group = "g", memory = 16 * 1024 * 1024, workers = 1, max_deliveries = 1,
  dead_letter = "big.dead",
  handle = function(msg)
    if msg.nap then ls.sleep(200) end
    if msg.grow then
      while true do keep[#keep + 1] = string.rep("x", 1000) .. #keep end
    end
    ls.log.info("small", { n = msg.n, kept = #keep })
  end,
}
]],
    })
    local host = helper.host_start({}, { server = srv, dir = dir })
    host:wait_log(READY, 20, { plain = true })
    -- In one script, so that one read brings all three: the grower waits in
    -- the lane while the sleeper sleeps.
    local ids = assert(srv:call("EVAL", [[
local ids = {}
for i, data in ipairs(ARGV) do ids[i] = redis.call("XADD", "big", "*", "data", data) end
return ids
]], "0", '{"nap":true,"n":1}', '{"grow":true}', '{"n":3}'))
    local grow = ids[2]
    host:wait_records({ msg = "small", n = "3" }, 1, 20, "the entry after the grower")
    local past = host:records({ msg = PAST })
    assert.equal(1, #past, host:log())
    assert.equal(grow, past[1].id)
    assert.equal("1", past[1].failed)
    assert.equal(1, #host:records({ msg = "small", n = "1" }))
    assert.equal("0", host:records({ msg = "small", n = "3" })[1].kept)
    local dead = host:records({ msg = "entry dead-lettered" })
    assert.equal(1, #dead, host:log())
    assert.equal(grow, dead[1].id)
    assert.equal("memory", dead[1].reason)
    helper.wait_until(function() return #srv:pending_ids("big", "g") == 0 end, 10, "the acks")
    local letters = srv:xrange("big.dead")
    assert.equal(1, #letters)
    assert.equal(grow, letters[1].fields["dead-letter-id"])
    assert.is_true(host:alive())
    assert.equal(0, host:stop(10))
  end)

  it("check refuses a bad memory field, naming file and field", function()
    local dir = helper.handlers_dir({ ["grow.lua"] = grower('memory = "lots",', "one") })
    local code, stdout, stderr = helper.luastream("check", dir, { timeout = 20 })
    assert.equal(1, code, stdout .. stderr)
    assert.truthy(stderr:find(dir .. "/grow.lua:4: field 'memory' must be a number of bytes from 4194304 to",
      1, true), stderr)
    dir = helper.handlers_dir({ ["grow.lua"] = grower("memory = 1000,", "one") })
    code, stdout, stderr = helper.luastream("check", dir, { timeout = 20 })
    assert.equal(1, code, stdout .. stderr)
    assert.truthy(stderr:find("field 'memory' must be a number of bytes from 4194304 to 1099511627776, got 1000",
      1, true), stderr)
  end)

  it("exits 70 naming the handler when the process runs out of memory under the limit", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({
      -- 128 MB strings: a few reach the ulimit (or one AddressSanitizer's
      -- largest allocation) long before the limit or the watchdog.
      ["grow.lua"] = grower("memory = 1024 * 1024 * 1024 * 1024,", "one", 'string.rep("x", 2 ^ 27 + #keep)'),
      ["other.lua"] = OTHER,
    })
    local bin = helper.bin()
    local opts = { server = srv, dir = dir }
    if sanitized(bin) then
      -- AddressSanitizer needs its address space: a malloc above 64 MB fails instead.
      opts.env = { ASAN_OPTIONS = "allocator_may_return_null=1:max_allocation_size_mb=64" }
    else
      local wrapper = helper.tmpdir("ulimit") .. "/luastream"
      helper.write_file(wrapper, "#!/bin/sh\nulimit -v 1048576\nexec '" .. bin .. "' \"$@\"\n")
      assert(os.execute("chmod +x '" .. wrapper .. "'"))
      opts.bin = wrapper
    end
    local host = helper.host_start({}, opts)
    host:wait_log(READY, 20, { plain = true })
    local id = entry(srv, "big", '{"grow":true}')
    assert.equal(70, host:wait_exit(60), host:log())
    local recs = host:records({ failure = "out of memory" })
    assert.equal(1, #recs, host:log())
    assert.equal("error", recs[1].level)
    assert.equal("grow", recs[1].handler)
    assert.equal("70", recs[1].exit_status)
    assert.truthy(recs[1].error:find("the process is out of memory", 1, true), recs[1].error)
    assert.same({ id }, (srv:pending_ids("big", "g")))
  end)
end)
