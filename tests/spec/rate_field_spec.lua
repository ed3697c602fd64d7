-- The handler field rate (docs/handlers.md, "Rate limits: the rate field")
-- on the in-memory broker and its virtual clock: exactly the entries the
-- rule allows in each second, a burst, two hosts sharing one limit, the
-- partitions of a handler sharing it, no delivery counted for waiting, and
-- bad values refused with the file's line.
local handler = require "luastream.handler"

local SPEC_DIR = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")
local HERE = SPEC_DIR .. "/fixtures"

local apps = dofile(SPEC_DIR .. "/support/apps.lua")(HERE)
local start = apps.start

local function publish(app, n, opts)
  for i = 1, n do app:publish("jobs", { n = i }, opts) end
end

local function handled(app) return #app:received("jobs") end

describe("the rate field", function()
  after_each(apps.stop_all)

  it("runs 10 entries in each second for 10/s, none read before its permit", function()
    local app = start("rate_field")
    publish(app, 60)
    app:settle()
    assert.equal(1, handled(app)) -- the burst of 10/s: one permit
    assert.same({}, app:pending("jobs", "work"), "nothing is read without a permit")
    app:advance(99)
    assert.equal(1, handled(app))
    app:advance(1)
    assert.equal(2, handled(app))
    local before = handled(app)
    for second = 1, 5 do
      app:advance(1000)
      assert.equal(10, handled(app) - before, "in second " .. second)
      before = handled(app)
      -- at most one entry read ahead of its run: read entries are permitted ones
      assert.is_true(#app:pending("jobs", "work") <= 1)
    end
    -- no delivery counted for waiting: every entry ran at its first delivery
    for _, d in ipairs(app:received("jobs")) do
      assert.equal("0", d.headers["delivery-count"], d.id)
    end
    -- the limiter lives beside the group, in the stream's slot, and expires
    assert.equal(1, app:command("EXISTS", "luastream:rate:{jobs}:work"))
  end)

  it("lets the burst through at once, then the rate", function()
    local app = start("rate_field_burst")
    publish(app, 40)
    app:settle()
    assert.equal(5, handled(app))
    app:advance(1000)
    assert.equal(15, handled(app))
    app:advance(1000)
    assert.equal(25, handled(app))
  end)

  it("is shared by two hosts of one group", function()
    local a = start("rate_field_shared")
    local b = apps.keep(require("luastream.testing").app(HERE .. "/rate_field_shared",
                                                         { with = a, instance = 1 }))
    publish(a, 1000)
    a:advance(1000) -- the burst and the start
    -- GCRA: in any window of W seconds at most burst + 100 x W permits
    -- (the burst of 100/s: 5), and, with a backlog, no fewer than that
    -- less one burst (the permits taken just before the window)
    local first = handled(a) + handled(b)
    local base = first
    for second = 1, 4 do
      a:advance(1000)
      local now = handled(a) + handled(b)
      local n = now - base
      assert.is_true(n >= 95 and n <= 105, "second " .. second .. ": " .. n .. " entries")
      base = now
    end
    assert.is_true(base - first >= 395 and base - first <= 405, (base - first) .. " entries in 4 s")
    assert.is_true(handled(a) > 50 and handled(b) > 50, handled(a) .. " and " .. handled(b))
    assert.equal(1, a:command("EXISTS", "luastream:rate:{jobs}:work"))
  end)

  it("is one limit for all partitions, on the base stream", function()
    local app = start("rate_field_partitioned")
    for i = 1, 200 do app:publish("jobs", { n = i }, { key = "k" .. i, partitions = 4 }) end
    app:advance(1000)
    local base = handled(app)
    app:advance(3000)
    local n = handled(app) - base
    assert.is_true(n >= 59 and n <= 61, n .. " entries in 3 s")
    assert.equal(1, app:command("EXISTS", "luastream:rate:{jobs}:work"))
  end)
end)

describe("the rate field's checks", function()
  local PATH = "/nonexistent/handlers/h.lua"
  local function problems(source)
    local chunk = assert(loadstring(source, "@" .. PATH))
    local ok, err = pcall(handler.validate, chunk(), PATH, source)
    assert.is_false(ok, "expected a refusal:\n" .. source)
    return err
  end
  local function spec(rate)
    return 'return {\n  stream = "s", group = "g",\n  rate = ' .. rate .. ',\n  handle = function() end,\n}\n'
  end

  it("refuses what is not a rate, naming the file, line and field", function()
    assert.equal(PATH .. ":3: field 'rate' \"200\" must be permits per second, minute or hour: " ..
                 "\"200/s\", \"30/m\", \"1000/h\", optionally followed by \"burst N\"",
                 problems(spec('"200"')))
    assert.matches("^" .. PATH:gsub("%p", "%%%0") .. ":3: field 'rate' must be text such as",
                   problems(spec("200")))
    assert.matches(":3: field 'rate' \"10/s burst 0\": burst must be a whole number >= 1",
                   problems(spec('"10/s burst 0"')), 1, true)
    assert.matches(":3: field 'rate' .* must be permits per second", problems(spec('"5/d"')))
    assert.matches(":3: field 'rate' .* must be permits per second", problems(spec('"0/s"')))
    local per_key = 'return {\n  stream = "s", group = "g", handle = function() end,\n\n  rate_per_key = "5/x",\n}\n'
    assert.matches("^" .. PATH:gsub("%p", "%%%0") .. ":4: field 'rate_per_key' \"5/x\" must be permits per second",
                   problems(per_key))
  end)

  it("stops a host loading a bad rate, naming the file and line", function()
    local ok, err = pcall(require("luastream.testing").app, HERE .. "/rate_field_bad")
    assert.is_false(ok)
    assert.matches("rate_field_bad/jobs.lua:5: field 'rate' \"fast\" must be permits per second", tostring(err), 1, true)
  end)

  it("keeps the rule the host needs", function()
    local source = spec('"200/s burst 400"')
    local s = handler.validate(assert(loadstring(source))(), PATH, source)
    assert.same({ interval = 5000, burst = 400 }, s.rate)
    source = spec('"30/m"')
    s = handler.validate(assert(loadstring(source))(), PATH, source)
    assert.same({ interval = 2e6, burst = 1 }, s.rate)
  end)
end)

describe("the rate_per_key field", function()
  after_each(apps.stop_all)

  local function by_key(app)
    local n = {}
    for _, d in ipairs(app:received("jobs")) do
      local k = d.headers["partition-key"] or ""
      n[k] = (n[k] or 0) + 1
    end
    return n
  end

  it("runs 5 a second per key, a busy key holding up neither the lane nor other keys", function()
    local app = start("rate_per_key")
    for i = 1, 20 do app:publish("jobs", { n = i }, { key = "busy" }) end
    for i = 1, 10 do app:publish("jobs", { n = i }, { key = "k" .. i }) end
    app:publish("jobs", { n = 0 }) -- no key: no per-key limit
    app:settle()
    local n = by_key(app)
    assert.equal(1, n.busy) -- the burst of 5/s: one permit
    for i = 1, 10 do assert.equal(1, n["k" .. i], "k" .. i) end
    assert.equal(1, n[""])
    -- the 19 waiting for their key are in flight, holding no lane
    assert.equal(19, app:metric("luastream_entries_in_flight", { handler = "jobs" }))
    assert.equal(0, app:metric("luastream_lanes_busy", { handler = "jobs" }))
    for second = 1, 3 do
      app:advance(1000)
      assert.equal(1 + 5 * second, by_key(app).busy, "by second " .. second)
    end
    -- entries waiting for their key are neither delivered again nor counted:
    -- the heartbeat keeps them claimed past min_idle
    for _, d in ipairs(app:received("jobs")) do
      assert.equal("0", d.headers["delivery-count"], d.id)
    end
    for _, p in ipairs(app:pending("jobs", "work")) do assert.equal(1, p.deliveries, p.id) end
    -- state per key, beside the group, expiring when idle
    assert.equal(1, app:command("EXISTS", "luastream:rate:{jobs}:work:key:busy"))
    app:advance(2000)
    assert.equal(20, by_key(app).busy)
    app:advance(1000)
    assert.equal(0, app:command("EXISTS", "luastream:rate:{jobs}:work:key:busy"))
    assert.equal(0, app:command("EXISTS", "luastream:rate:{jobs}:work:key:k1"))
  end)

  it("asks for every key waiting in one call", function()
    local app = start("rate_per_key")
    app:settle()
    -- the limiter's script reads the server's clock once a call
    local function calls()
      return tonumber(app:command("INFO", "commandstats"):match("cmdstat_time:calls=(%d+)") or 0)
    end
    local before = calls()
    -- 51 entries in one command, so that one read brings them all
    app:command("EVAL", "for i = 1, 51 do redis.call('XADD', 'jobs', '*', 'data', '{}', " ..
                "'partition-key', 'k' .. (i > 50 and 1 or i)) end return 1", "0")
    app:settle()
    assert.equal(50, #app:received("jobs"))
    assert.equal(1, calls() - before)
    app:advance(200)
    assert.equal(51, #app:received("jobs"))
  end)

  it("names long and binary keys safely", function()
    local app = start("rate_per_key")
    local long = string.rep("x", 200)
    local binary = "a\0b\r\n{c}"
    app:publish("jobs", { n = 1 }, { key = long })
    app:publish("jobs", { n = 2 }, { key = long })
    app:publish("jobs", { n = 3 }, { key = binary })
    app:publish("jobs", { n = 4 }, { key = binary })
    app:settle()
    assert.equal(2, #app:received("jobs"))
    assert.equal(1, app:command("EXISTS", "luastream:rate:{jobs}:work:key:" .. binary))
    local sha = io.popen("printf %s " .. long .. " | sha1sum"):read("*l"):match("^(%x+)")
    assert.equal(1, app:command("EXISTS", "luastream:rate:{jobs}:work:keyh:" .. sha))
    app:advance(200)
    assert.equal(4, #app:received("jobs"))
  end)

  it("hands back the entries waiting for their key uncounted on stop", function()
    local a = start("rate_per_key")
    for i = 1, 10 do a:publish("jobs", { n = i }, { key = "busy" }) end
    a:settle()
    assert.equal(1, #a:received("jobs"))
    local b = start("rate_per_key", { with = a, hostname = "b" })
    a:stop() -- the 9 waiting for their key go back, their delivery that never ran uncounted
    b:advance(2000)
    local got = b:received("jobs")
    assert.equal(9, #got)
    for _, d in ipairs(got) do assert.equal("0", d.headers["delivery-count"], d.id) end
    assert.same({}, b:pending("jobs", "work"))
  end)
end)
