-- Handler code only the trusted users can change (as sshd's StrictModes):
-- the real binary refuses a handler directory, parent folder, handler file or
-- module that another user could write, at start, on hot reload and in
-- `luastream check`; --trust-owner and --allow-writable-dir. Files owned by
-- another user need root (chown nobody).
local helper = require "tests.integration.helper"
local sys = require "tests.integration.support.sys"

local READY = 'msg="host ready"'

local function handler(mark, stream)
  return string.format([[
local ls = require "luastream"
return {
  stream = %q, group = "g",
  handle = function(msg) ls.log.info("handled", { mark = %q }) end,
}
]], stream or "s", mark)
end

local function chmod(path, mode) assert(sys.C.chmod(path, tonumber(mode, 8)) == 0, "chmod " .. path) end

local function sh(cmd)
  local code, out, err = helper.run(cmd)
  assert(code == 0, cmd .. ": " .. out .. err)
end

local function is_root()
  local f = io.popen("id -u")
  local uid = f:read("*l")
  f:close()
  return uid == "0"
end

local function check(...)
  local code, out, err = helper.luastream("check", ...)
  return code, out .. err
end

describe("handler code other users can change", function()
  after_each(helper.cleanup)

  it("a world-writable handler directory is refused at start, naming it, its mode, owner and the fix", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["a.lua"] = handler("a") })
    chmod(dir, "777")
    local host = helper.host_start({}, { server = srv, dir = dir })
    assert.is_not.equal(0, host:wait_exit(20))
    local log = helper.read_file(host.path)
    assert.truthy(log:find(dir .. ": writable by its group and every user (mode 0777, owner root)", 1, true), log)
    assert.truthy(log:find("run `chmod go-w " .. dir .. "`", 1, true), log)
    assert.falsy(log:find(READY, 1, true))
  end)

  it("a writable parent folder is refused; /tmp (sticky, root's) is not", function()
    local top = helper.tmpdir("top")
    sh("mkdir " .. top .. "/handlers && cp /dev/null " .. top .. "/handlers/.keep")
    helper.write_file(top .. "/handlers/a.lua", handler("a"))
    chmod(top, "775")
    local code, out = check(top .. "/handlers")
    assert.equal(1, code)
    assert.truthy(out:find(top .. ": writable by its group (mode 0775, owner root)", 1, true), out)
    chmod(top, "755")
    code, out = check(top .. "/handlers")
    assert.equal(0, code, out)
  end)

  it("a group-writable handler file, or module, is refused by check", function()
    local dir = helper.handlers_dir({
      ["a.lua"] = 'local m = require "_shared"\n' .. handler("a"),
      ["_shared.lua"] = "return {}\n",
    })
    assert.equal(0, (check(dir)))
    chmod(dir .. "/_shared.lua", "664")
    local code, out = check(dir)
    assert.equal(1, code)
    assert.truthy(out:find(dir .. "/a.lua:1: module '_shared' not loaded: " .. dir ..
      "/_shared.lua: writable by its group (mode 0664, owner root)", 1, true), out)
    chmod(dir .. "/_shared.lua", "644")
    chmod(dir .. "/a.lua", "666")
    code, out = check(dir)
    assert.equal(1, code)
    assert.truthy(out:find("run `chmod go-w " .. dir .. "/a.lua`", 1, true), out)
  end)

  it("modules come from the handler directory only, never the working directory", function()
    local dir = helper.handlers_dir({ ["a.lua"] = 'require "_planted"\n' .. handler("a") })
    local cwd = helper.tmpdir("cwd")
    helper.write_file(cwd .. "/_planted.lua", "error('planted module ran')\n")
    local code, out, err = helper.run({ "/bin/sh", "-c",
      "cd " .. cwd .. " && exec " .. helper.bin() .. " check " .. dir })
    out = out .. err
    assert.equal(1, code)
    assert.falsy(out:find("planted module ran", 1, true), out)
    assert.truthy(out:find("module '_planted' not found", 1, true), out)
  end)

  it("on hot reload: a directory made writable keeps the running handlers and starts nothing new", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["a.lua"] = handler("a") })
    local host = helper.host_start({}, { server = srv, dir = dir })
    host:wait_log(READY, 20, { plain = true })
    chmod(dir, "777")
    helper.write_file(dir .. "/b.lua", handler("b", "s2"))
    host:wait_records({ msg = "reload refused: other users can change the handler directory, the running handlers stay" },
      1, 10, "the reload refused")
    local rec = host:records({ msg = "reload refused: other users can change the handler directory, the running handlers stay" })[1]
    assert.truthy(rec.error:find(dir .. ": writable by its group and every user (mode 0777, owner root)", 1, true))
    -- a: still running; b: never started
    srv:cli("XADD", "s", "*", "data", "{}")
    host:wait_records({ msg = "handled", mark = "a" }, 1, 10, "a still handles")
    assert.equal(0, #host:records({ msg = "handler added" }))
    -- the directory fixed, the next reload starts b
    chmod(dir, "755")
    host:signal("HUP")
    host:wait_records({ msg = "handler added", handler = "b" }, 1, 10, "b started once fixed")
  end)

  it("on hot reload: a handler file made writable is not loaded, the running version stays", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["a.lua"] = handler("a") })
    local host = helper.host_start({}, { server = srv, dir = dir })
    host:wait_log(READY, 20, { plain = true })
    helper.write_file(dir .. "/a.lua", handler("changed"))
    chmod(dir .. "/a.lua", "666")
    host:signal("HUP")
    local rec = host:wait_records({ msg = "handler reload failed, the running version stays" }, 1, 10)[1]
    assert.truthy(rec.error:find(dir .. "/a.lua: writable by its group and every user (mode 0666", 1, true), rec.error)
    srv:cli("XADD", "s", "*", "data", "{}")
    host:wait_records({ msg = "handled", mark = "a" }, 1, 10, "the old version handles")
    assert.equal(0, #host:records({ msg = "handled", mark = "changed" }))
  end)

  describe("as root", function()
    it("a handler file owned by nobody is refused; --trust-owner nobody accepts it", function()
      if not is_root() then return pending("needs root to give a file to nobody") end
      local srv = helper.redis_start()
      local dir = helper.handlers_dir({ ["a.lua"] = handler("a") })
      sh("chown nobody " .. dir .. "/a.lua")
      local code, out = check(dir)
      assert.equal(1, code)
      assert.truthy(out:find(dir .. "/a.lua: owned by nobody (mode 0644), not by root or a --trust-owner", 1, true), out)
      assert.truthy(out:find("--trust-owner nobody", 1, true), out)
      local host = helper.host_start({}, { server = srv, dir = dir })
      assert.is_not.equal(0, host:wait_exit(20))
      assert.truthy(helper.read_file(host.path):find("owned by nobody", 1, true))

      assert.equal(0, (check("--trust-owner", "nobody", dir)))
      host = helper.host_start({ "--trust-owner", "nobody" }, { server = srv, dir = dir })
      host:wait_log(READY, 20, { plain = true })
      -- status loads the files too
      local _, out2, err2 = helper.luastream("status", "--redis", srv.url, dir)
      assert.truthy((out2 .. err2):find(dir .. "/a.lua: owned by nobody", 1, true), out2 .. err2)
      _, out2, err2 = helper.luastream("status", "--redis", srv.url, "--trust-owner", "nobody", dir)
      assert.falsy((out2 .. err2):find("owned by nobody", 1, true), out2 .. err2)
    end)

    it("--trust-owner with an unknown user is a usage error", function()
      local code, out = check("--trust-owner", "no-such-user-here", helper.tmpdir("x"))
      assert.equal(2, code)
      assert.truthy(out:find("--trust-owner no-such-user-here: no such user", 1, true), out)
    end)
  end)

  it("--allow-writable-dir loads all the same, with a warning naming each path", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["a.lua"] = handler("a") })
    chmod(dir, "777")
    chmod(dir .. "/a.lua", "666")
    local host = helper.host_start({ "--allow-writable-dir" }, { server = srv, dir = dir })
    host:wait_log(READY, 20, { plain = true })
    local warned = host:records({ msg = "loading code other users can change (--allow-writable-dir)" })
    local text = {}
    for _, r in ipairs(warned) do text[#text + 1] = r.problem end
    text = table.concat(text, "\n")
    assert.truthy(text:find(dir .. ": writable by", 1, true), text)
    assert.truthy(text:find(dir .. "/a.lua: writable by", 1, true), text)
    assert.equal(1, #host:records({ level = "warn", dir = dir }))
    srv:cli("XADD", "s", "*", "data", "{}")
    host:wait_records({ msg = "handled", mark = "a" }, 1, 10)
    local code, out = check("--allow-writable-dir", dir)
    assert.equal(0, code, out)
  end)
end)
