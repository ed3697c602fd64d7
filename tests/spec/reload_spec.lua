-- Hot reload on the in-process harness: handler files are rewritten in a
-- temp directory and app:reload() does what a changed directory (or SIGHUP)
-- does in `luastream run`.
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

-- A handler on `stream` that replies {v = v}; entries with slow = true sleep
-- a second first.
local function handler(stream, v, extra)
  return string.format([[
local ls = require "luastream"
return {
  stream = %q,
  group = "g",
  reply_to = %q,
  %s
  handle = function(msg)
    if msg.slow then ls.sleep(1000) end
    ls.log.info("handled", { v = %d })
    return ls.reply({ v = %d })
  end,
}
]], stream, stream .. ".out", extra or "", v, v)
end

local function grep(app, pattern)
  local out = {}
  for _, line in ipairs(app:logs()) do
    if line:find(pattern) then out[#out + 1] = line end
  end
  return out
end

local function reloaded_versions(app, name)
  local lines = grep(app, 'handler=' .. name .. ' msg="handler reloaded')
  local last = assert(lines[#lines], "no reload logged for " .. name)
  return last:match("version=(%x*)%->(%x+)")
end

local function by_id(list)
  local out = {}
  for _, d in ipairs(list) do out[d.id] = d end
  return out
end

describe("hot reload", function()
  local dir, app
  before_each(function() dir = tempdir() end)
  after_each(function()
    if app then app:stop() end
    app = nil
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("swaps the handler in place: running entries finish on the old version, later ones run the new", function()
    write(dir .. "/a.lua", handler("s", 1, "workers = 4,"))
    app = testing.app(dir)
    local slow = app:publish("s", { slow = true })   -- running (sleeping) across the switch
    write(dir .. "/a.lua", handler("s", 2, "workers = 4,"))
    app:reload()
    local old, new = reloaded_versions(app, "a")
    assert.is_truthy(old and new and old ~= new and #new == 8)
    local fresh = app:publish("s", { n = 2 })
    app:advance(1000)
    local got = by_id(app:received("a"))
    assert.equal(old, got[slow].version)
    assert.equal(new, got[fresh].version)
    local replies = {}
    for _, e in ipairs(app:entries("s.out")) do replies[e.headers["original-id"]] = e end
    assert.same({ v = 1 }, replies[slow].message)
    assert.equal(old, replies[slow].headers["handler-version"])
    assert.same({ v = 2 }, replies[fresh].message)
    assert.equal(new, replies[fresh].headers["handler-version"])
    -- the handler's own log lines say which version wrote them
    assert.equal(1, #grep(app, 'msg=handled v=1 version=' .. old))
    assert.equal(1, #grep(app, 'msg=handled v=2 version=' .. new))
    assert.equal(0, #app:pending("s", "g"))
    -- the subscription itself went on: no stop, no second group creation
    assert.equal(0, #grep(app, 'msg="subscription stopped"'))
  end)

  it("keeps the old version when the new file does not load, and says so once per change", function()
    write(dir .. "/a.lua", handler("s", 1))
    app = testing.app(dir)
    local before = app:received("a")
    app:publish("s", { n = 1 })
    local v1 = app:received("a")[#before + 1].version
    write(dir .. "/a.lua", "return {\n  stream = 's',\n  handle = function( end,\n}\n")
    app:reload()
    app:reload()
    app:advance(1000)
    app:reload()
    local failed = grep(app, 'msg="handler reload failed, the running version stays"')
    assert.equal(1, #failed)
    assert.matches("version=" .. v1, failed[1], 1, true)
    assert.matches(dir .. "/a.lua:3:", failed[1], 1, true)
    local id = app:publish("s", { n = 2 })
    assert.equal(v1, by_id(app:received("a"))[id].version)
    -- another bad content is another change: reported again
    write(dir .. "/a.lua", "return 42\n")
    app:reload()
    assert.equal(2, #grep(app, 'msg="handler reload failed'))
    -- a good file again switches
    write(dir .. "/a.lua", handler("s", 3))
    app:reload()
    local old, new = reloaded_versions(app, "a")
    assert.equal(v1, old)
    id = app:publish("s", { n = 3 })
    assert.equal(new, by_id(app:received("a"))[id].version)
  end)

  it("debounces file events on the clock", function()
    write(dir .. "/a.lua", handler("s", 1))
    app = testing.app(dir)
    write(dir .. "/a.lua", handler("s", 2))
    app:reload_soon()
    app:advance(150)
    app:reload_soon()                                 -- another event: the wait starts again
    app:advance(150)
    assert.equal(0, #grep(app, 'msg="handler reloaded"'))
    app:advance(60)
    assert.equal(1, #grep(app, 'msg="handler reloaded"'))
  end)

  it("starts a subscription for a new file and stops the one of a removed file", function()
    write(dir .. "/a.lua", handler("s", 1))
    app = testing.app(dir)
    write(dir .. "/b.lua", handler("t", 1))
    app:reload()
    assert.equal(1, #grep(app, 'handler=b msg="handler added"'))
    local id = app:publish("t", { n = 1 })
    assert.equal(id, app:received("b")[1].id)
    os.remove(dir .. "/b.lua")
    app:reload()
    assert.equal(1, #grep(app, 'handler=b msg="handler file removed, stopping its subscription"'))
    assert.equal(1, #grep(app, 'handler=b msg="subscription stopped"'))
    app:publish("t", { n = 2 })
    app:advance(5000)
    assert.equal(1, #app:received("b"))               -- nobody reads t any more
    -- a still runs
    local s = app:publish("s", { n = 1 })
    assert.equal(s, app:received("a")[1].id)
    -- and b comes back when its file does
    write(dir .. "/b.lua", handler("t", 2))
    app:reload()
    app:advance(100)
    assert.equal(2, #app:received("b"))
  end)

  it("restarts only the subscription whose fields changed, after draining it", function()
    write(dir .. "/a.lua", handler("s", 1))
    write(dir .. "/c.lua", handler("u", 1))
    app = testing.app(dir)
    local slow = app:publish("s", { slow = true })
    write(dir .. "/a.lua", handler("s", 2, "workers = 2,"))
    app:reload()
    local restart = grep(app, 'handler=a msg="handler reloaded, restarting its subscription"')
    assert.equal(1, #restart)
    assert.matches("changed=workers", restart[1], 1, true)
    local _, new = restart[1]:match("version=(%x*)%->(%x+)")
    local later = app:publish("s", { n = 2 })         -- waits until the old one has drained
    assert.is_nil(by_id(app:received("a"))[later])
    local other = app:publish("u", { n = 1 })         -- c is not touched
    assert.equal(other, app:received("c")[1].id)
    app:advance(1000)
    local got = by_id(app:received("a"))
    assert.are_not.equal(new, got[slow].version)
    assert.equal(new, got[later].version)
    assert.equal(1, #grep(app, 'handler=a msg="subscription stopped"'))
    assert.equal(0, #grep(app, 'handler=c msg="subscription stopped"'))
    assert.equal(0, #app:pending("s", "g"))
    assert.equal(2, #app:entries("s.out"))
  end)

  it("reloads every file on a forced reload (SIGHUP), changed or not", function()
    write(dir .. "/a.lua", handler("s", 1))
    app = testing.app(dir)
    app:reload()
    assert.equal(0, #grep(app, 'msg="handler reloaded"'))
    app:reload(true)
    local old, new = reloaded_versions(app, "a")
    assert.equal(old, new)
  end)
end)
