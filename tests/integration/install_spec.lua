-- An installed luastream: `cmake --install` of the build under test into a
-- temporary prefix, then the installed binary run from a folder outside the
-- checkout on a copy of the example handlers. It must need no file of the
-- checkout (its Lua library is compiled in), and the installed busted harness
-- must load from the prefix.
local helper = require "tests.integration.helper"
local cjson = require "cjson"

local EXAMPLES = helper.repo_root .. "/handlers/before-8.4"
local READY = 'msg="host ready"'

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

local function sh_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local function mkdir(path) assert.equal(0, (helper.run({ "mkdir", "-p", path }))) end

-- The build folder of the binary under test, as configured by CMake.
local function build_dir()
  local dir = helper.bin():gsub("/[^/]*$", "")
  assert(exists(dir .. "/CMakeCache.txt"),
    "the binary under test (" .. helper.bin() .. ") is not in a CMake build folder")
  return dir
end

-- Installs the build under test into a fresh prefix; returns the prefix.
local function install()
  local prefix = helper.tmpdir("prefix")
  local code, out, err = helper.run({ "cmake", "--install", build_dir(), "--prefix", prefix })
  assert.equal(0, code, out .. err)
  return prefix
end

-- A folder outside the checkout holding a copy of the example as handlers/.
local function workdir()
  local dir = helper.tmpdir("work")
  local code, out, err = helper.run({ "cp", "-RL", EXAMPLES, dir .. "/handlers" })
  assert.equal(0, code, out .. err)
  return dir
end

-- Runs the installed binary in dir: exit code, stdout, stderr. Without
-- LUASTREAM_LUA_DIR unless env gives it.
local function luastream_in(dir, prefix, args, env)
  local cmd = "cd " .. sh_quote(dir) .. " && exec " .. sh_quote(prefix .. "/bin/luastream")
  for _, a in ipairs(args) do cmd = cmd .. " " .. sh_quote(a) end
  local e = { LUASTREAM_LUA_DIR = false }
  for k, v in pairs(env or {}) do e[k] = v end
  return helper.run(cmd, { env = e })
end

-- A handler that names, at load, the file the luastream module came from.
local WHERE = [[
local ls = require "luastream"
local info = debug.getinfo(ls.duration, "S")
error("luastream loaded from " .. info.source, 0)
]]

describe("an installed luastream", function()
  after_each(helper.cleanup)

  it("installs the program and the busted harness under the prefix", function()
    local prefix = install()
    for _, file in ipairs { "/bin/luastream", "/share/lua/5.1/luastream.lua",
                            "/share/lua/5.1/luastream/testing.lua",
                            "/share/lua/5.1/luastream/json.lua",
                            "/lib/lua/5.1/luastream_testing.so" } do
      assert(exists(prefix .. file), "not installed: " .. file)
    end
    local code, out, err = luastream_in(prefix, prefix, { "--version" })
    assert.equal(0, code, err)
    assert.matches("%d+%.%d+%.%d+", out)
  end)

  it("checks the example from outside the checkout with its compiled-in Lua library", function()
    local prefix, dir = install(), workdir()
    local code, out, err = luastream_in(dir, prefix, { "check", "handlers" })
    assert.equal(0, code, out .. err)
    assert.matches("every handler file is valid", out .. err, 1, true)

    -- the library is not read from the checkout
    mkdir(dir .. "/where")
    helper.write_file(dir .. "/where/where.lua", WHERE)
    code, out, err = luastream_in(dir, prefix, { "check", "where" })
    assert.equal(1, code, out .. err)
    local source = (out .. err):match("luastream loaded from (%S+)")
    assert(source, out .. err)
    assert.is_nil(source:find(helper.repo_root, 1, true), "read from the checkout: " .. source)
  end)

  it("LUASTREAM_LUA_DIR replaces the compiled-in library, every module of it", function()
    local prefix, dir = install(), workdir()
    -- a folder missing one module: no other copy is mixed in, not even
    -- the one installed under the prefix
    local partial = helper.tmpdir("lua")
    assert(os.execute("mkdir -p " .. sh_quote(partial .. "/luastream") .. " && cp " ..
      sh_quote(helper.repo_root .. "/lua/luastream.lua") .. " " .. sh_quote(partial)))
    local code, out, err = luastream_in(dir, prefix, { "check", "handlers" },
      { LUASTREAM_LUA_DIR = partial })
    assert.equal(1, code, out .. err)
    assert.matches("LUASTREAM_LUA_DIR=" .. partial .. ": cannot open " .. partial ..
      "/luastream/handler.lua", out .. err, 1, true)
    code, out, err = luastream_in(dir, prefix, { "check", "handlers" },
      { LUASTREAM_LUA_DIR = helper.repo_root .. "/lua" })
    assert.equal(0, code, out .. err)
  end)

  it("runs the example from outside the checkout: a published payment is posted and screened", function()
    local prefix, dir = install(), workdir()
    local srv = helper.redis_start()
    -- host_start runs opts.bin with the handler folder last: a wrapper that
    -- first changes to the work folder, so "handlers" is the copy there
    local wrapper = dir .. "/luastream-here"
    helper.write_file(wrapper, "#!/bin/sh\ncd " .. sh_quote(dir) .. " && exec " ..
      sh_quote(prefix .. "/bin/luastream") .. ' "$@"\n')
    assert.equal(0, (helper.run({ "chmod", "+x", wrapper })))
    local host = helper.host_start({}, { server = srv, dir = "handlers", bin = wrapper,
                                         env = { LUASTREAM_LUA_DIR = false } })
    host:wait_log(READY, 20, { plain = true })

    local id = helper.publish(srv, "payments", helper.payment(1, "acme", 500), { key = "acme" })
    helper.wait_until(function() return srv:xlen("payments.screened") >= 1 end, 20,
      "the reply on payments.screened")
    for _, group in ipairs { "ledger", "fraud" } do
      helper.wait_until(function()
        local g = srv:group("payments", group)
        return g and g.pending == 0 and g["last-delivered-id"] == id, g and cjson.encode(g)
      end, 10, "group " .. group .. " to ack the payment")
    end
    assert.equal(1, host:count({ msg = "payment posted" }))
    assert.equal(0, host:stop())
    assert.equal("500", srv:call("HGET", "ledger:balances", "acme"))

    local reply = srv:xrange("payments.screened")[1]
    assert.equal(id, reply.fields["original-id"])
    assert.equal(1, cjson.decode(reply.fields.data).payment_id)
  end)

  it("the installed harness runs a busted spec from the prefix alone", function()
    local prefix, dir = install(), workdir()
    mkdir(dir .. "/spec")
    helper.write_file(dir .. "/spec/payment_spec.lua", [[
local testing = require "luastream.testing"
describe("the installed harness", function()
  it("posts a payment", function()
    local app = testing.app("handlers")
    app:publish("payments", { id = 1, account = "acme", amount_cents = 500 }, { key = "acme" })
    assert.equal("reply", app:received("post_new_payment")[1].outcome)
    assert.equal(1, #app:received("screen_payment"))
    app:stop()
  end)
end)
]])
    local env = {
      LUA_PATH = prefix .. "/share/lua/5.1/?.lua;;",
      LUA_CPATH = prefix .. "/lib/lua/5.1/?.so;;",
      LUASTREAM_TESTING_LIB = false,
    }
    -- a sanitizer build's module needs its runtime loaded first
    if (helper.read_file(build_dir() .. "/CMakeCache.txt")):find("LUASTREAM_SANITIZE:BOOL=ON", 1, true) then
      local libs = {}
      for _, lib in ipairs { "libasan.so", "libubsan.so" } do
        local _, out = helper.run({ "gcc", "-print-file-name=" .. lib })
        libs[#libs + 1] = helper.trim(out)
      end
      env.LD_PRELOAD = table.concat(libs, " ")
      env.ASAN_OPTIONS = "detect_leaks=0"
    end
    local code, out, err = helper.run("cd " .. sh_quote(dir) .. " && exec luajit /usr/bin/busted spec/",
      { env = env })
    assert.equal(0, code, out .. err)
    assert.matches("1 success", out, 1, true)
  end)

  -- docs/operations.md lists the .deb's Depends: every package dpkg-shlibdeps
  -- finds for the program must be named there.
  it("the .deb's Depends are the packages docs/operations.md names", function()
    local out_dir = helper.tmpdir("deb")
    local code, out, err = helper.run({ "cpack", "-G", "DEB", "--config", build_dir() .. "/CPackConfig.cmake",
      "-B", out_dir }, { timeout = 120 })
    assert.equal(0, code, out .. err)
    local _, ls = helper.run({ "sh", "-c", "ls " .. sh_quote(out_dir) .. "/*.deb" })
    local deb = assert(helper.trim(ls):match("^(%S+%.deb)$"), "no .deb in " .. out_dir .. ": " .. ls)
    local code2, depends, err2 = helper.run({ "dpkg-deb", "-f", deb, "Depends" })
    assert.equal(0, code2, err2)
    local doc = helper.read_file(helper.repo_root .. "/docs/operations.md")
    local list = assert(doc:match("Its Depends are (.-)Maintainer field"), "the Depends paragraph of docs/operations.md")
    local named = {}
    for name in list:gmatch("`([%w%.%+%-]+)`") do named[name] = true end
    local n = 0
    for name in depends:gmatch("([%w%.%+%-]+)[^,|]*") do
      -- libc6 goes without saying; a sanitizer build also links its runtimes
      if name ~= "libc6" and not name:find("^libasan") and not name:find("^libubsan") and not name:find("^libgcc") then
        n = n + 1
        assert(named[name], name .. " is in the .deb's Depends (" .. helper.trim(depends)
          .. ") but not in docs/operations.md's list")
      end
    end
    assert(n >= 5, "Depends: " .. depends)
  end)
end)
