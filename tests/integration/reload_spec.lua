-- Hot reload against a real redis-server and the real binary: handler files
-- edited, broken, added and removed while `luastream run` reads; SIGHUP.
local helper = require "tests.integration.helper"

local READY = 'msg="host ready"'

-- Logs every entry it handles with the entry's n and its own mark; the host
-- adds version= (the script's content hash) to each line.
local function counter(mark, stream)
  return string.format([[
local ls = require "luastream"
return {
  stream = %q, group = "g",
  handle = function(msg)
    ls.log.info("handled", { n = msg.n, mark = %q })
  end,
}
]], stream or "s", mark)
end

-- Replaces path whole (write then rename), as editors and deploys do.
local function replace(path, text)
  helper.write_file(path .. ".tmp", text)
  assert(os.rename(path .. ".tmp", path))
end

local function entries(first, last, stream)
  local cmds = {}
  for n = first, last do
    cmds[#cmds + 1] = { "XADD", stream or "s", "*", "data", string.format('{"n":%d}', n) }
  end
  return cmds
end

local function sleep(s) pcall(helper.wait_until, function() return false end, s) end

local function handled(host, stream_mark)
  return host:records(function(r) return r.msg == "handled" and (not stream_mark or r.mark == stream_mark) end)
end

describe("hot reload", function()
  after_each(helper.cleanup)

  it("switches versions while 10,000 entries stream through: each handled once, old then new", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["count.lua"] = counter("one") })
    local host = helper.host_start({}, { server = srv, dir = dir })
    host:wait_log(READY, 20, { plain = true })
    local N, CHUNK = 10000, 250
    local n = 0
    while n < N do
      srv:pipe(entries(n + 1, n + CHUNK))
      n = n + CHUNK
      if n == N / 2 then
        replace(dir .. "/count.lua", counter("two"))
        -- the second half is published once the switch is made: a fast
        -- host would otherwise finish all of it within the 200 ms debounce
        host:wait_records({ msg = "handler reloaded" }, 1, 10, "the edit picked up")
      end
      helper.wait_until(function() return #handled(host) >= n - 2 * CHUNK end, 30, "the host to keep up")
    end
    host:wait_records({ msg = "handled" }, N, 60, "every entry handled")
    local reloads = host:records({ msg = "handler reloaded", handler = "count" })
    assert.equal(1, #reloads)
    local old, new = reloads[1].version:match("^(%x+)%->(%x+)$")
    assert.is_truthy(old and new and old ~= new)
    -- exactly once each, and by version in entry order: old ones, then new ones
    local seen, switched_at = {}, nil
    for _, r in ipairs(handled(host)) do
      local i = tonumber(r.n)
      assert.is_nil(seen[i], "handled twice: " .. i)
      seen[i] = r.version
      assert.equal(r.mark == "one" and old or new, r.version)
    end
    for i = 1, N do
      assert.is_not_nil(seen[i], "never handled: " .. i)
      if seen[i] == new and not switched_at then switched_at = i end
      if switched_at then assert.equal(new, seen[i], "old version after the switch: " .. i) end
    end
    assert.is_truthy(switched_at and switched_at > 1 and switched_at <= N)
    assert.equal(old, seen[1])
    assert.equal(new, seen[N])
    assert.equal(0, host:count({ level = "error" }))
    assert.same({}, srv:pending_ids("s", "g"))
    assert.equal(0, host:stop(20))
  end)

  it("keeps the old version when the edit does not load, and reports it once", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["count.lua"] = counter("one") })
    local host = helper.host_start({}, { server = srv, dir = dir })
    host:wait_log(READY, 20, { plain = true })
    srv:pipe(entries(1, 1))
    host:wait_records({ msg = "handled" }, 1, 10)
    local v1 = handled(host)[1].version
    replace(dir .. "/count.lua", "return {\n  stream = 's',\n  handle = function( end\n}\n")
    host:wait_log('msg="handler reload failed, the running version stays"', 10, { plain = true })
    local failed = host:records({ msg = "handler reload failed, the running version stays" })
    assert.matches(dir .. "/count.lua:3:", failed[1].error, 1, true)
    assert.equal(v1, failed[1].version)
    -- another event on the same content is not reported again
    helper.write_file(dir .. "/unrelated.txt", "x")
    srv:pipe(entries(2, 2))
    host:wait_records({ msg = "handled" }, 2, 10)
    sleep(0.6) -- past the debounce
    assert.equal(1, host:count({ msg = "handler reload failed, the running version stays" }))
    assert.equal(v1, handled(host)[2].version)
    assert.equal(0, host:stop(20))
  end)

  it("starts a subscription for an added file and stops the one of a deleted file", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["count.lua"] = counter("one") })
    local host = helper.host_start({}, { server = srv, dir = dir })
    host:wait_log(READY, 20, { plain = true })
    replace(dir .. "/extra.lua", counter("extra", "t"))
    host:wait_records({ msg = "subscription reading", handler = "extra" }, 1, 10)
    srv:pipe(entries(1, 3, "t"))
    host:wait_records({ msg = "handled", mark = "extra" }, 3, 10)
    os.remove(dir .. "/extra.lua")
    host:wait_records({ msg = "subscription stopped", handler = "extra" }, 1, 10)
    srv:pipe(entries(4, 4, "t"))
    srv:pipe(entries(1, 1, "s"))
    host:wait_records({ msg = "handled", mark = "one" }, 1, 10)
    assert.equal(3, #handled(host, "extra"))      -- nobody reads t any more
    assert.equal(0, host:count({ msg = "subscription stopped", handler = "count" }))
    assert.equal(0, host:stop(20))
  end)

  it("reloads on SIGHUP, also with --no-reload, which stops the watching", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["count.lua"] = counter("one") })
    local host = helper.host_start({ "--no-reload" }, { server = srv, dir = dir })
    host:wait_log(READY, 20, { plain = true })
    replace(dir .. "/count.lua", counter("two"))
    sleep(0.6) -- no watcher: nothing happens
    assert.equal(0, host:count({ msg = "handler reloaded" }))
    host:signal("HUP")
    host:wait_records({ msg = "handler reloaded", handler = "count" }, 1, 10)
    srv:pipe(entries(1, 1))
    host:wait_records({ msg = "handled" }, 1, 10)
    assert.equal("two", handled(host)[1].mark)
    assert.equal(0, host:stop(20))
  end)
end)
