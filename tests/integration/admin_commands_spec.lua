-- The server's administration is refused to handlers, the same on ctx:write
-- and ls.redis: every command of the real server's @admin category (ACL CAT
-- admin) and those that empty, swap or overwrite whole databases.
local helper = require "tests.integration.helper"

local READY = 'msg="host ready"'

local function start(srv, handle_body)
  local dir = helper.handlers_dir({ ["admin.lua"] = string.format([[
local ls = require "luastream"
return {
  stream = "s", group = "g", max_deliveries = 1,
  handle = function(msg, ctx)
%s
  end,
}
]], handle_body) })
  local host = helper.host_start({}, { server = srv, dir = dir })
  host:wait_log(READY, 20, { plain = true })
  return host
end

describe("server administration from a handler", function()
  after_each(helper.cleanup)

  it("ctx:write(\"FLUSHALL\") is refused and the database stays", function()
    local srv = helper.redis_start()
    srv:cli("SET", "precious", "1")
    local host = start(srv, [[
    ctx:write("FLUSHALL")
    return ls.ack()]])
    srv:cli("XADD", "s", "*", "data", "{}")
    local rec = host:wait_records({ msg = "handler failed, entry left pending" }, 1, 10)[1]
    assert.truthy(rec.error:find('admin.lua:5: ctx:write: FLUSHALL is not available to handlers: ' ..
      "it is the server's administration", 1, true), rec.error)
    assert.equal("1", srv:cli("GET", "precious"))
  end)

  it("ls.redis.call(\"CONFIG\", \"SET\", ...) is refused and the setting stays", function()
    local srv = helper.redis_start()
    local before = srv:call("CONFIG", "GET", "maxmemory")
    local host = start(srv, [[
    local ok, err = pcall(ls.redis.call, "CONFIG", "SET", "maxmemory", "12345")
    ls.log.info("config", { ok = tostring(ok), err = err })]])
    srv:cli("XADD", "s", "*", "data", "{}")
    local rec = host:wait_records({ msg = "config" }, 1, 10)[1]
    assert.equal("false", rec.ok)
    assert.truthy(rec.err:find("ls.redis.call: CONFIG SET is not available to handlers", 1, true), rec.err)
    assert.same(before, srv:call("CONFIG", "GET", "maxmemory"))
  end)

  it("refuses every @admin command of the real server, on ls.redis and ctx:write alike", function()
    local srv = helper.redis_start()
    local list = {}
    for name in srv:cli("ACL", "CAT", "admin"):gmatch("[^\n]+") do
      -- shutdown last: if it ran, nothing after it would
      if name ~= "shutdown" then list[#list + 1] = name end
    end
    assert.is_true(#list > 50)
    list[#list + 1] = "shutdown"
    for _, extra in ipairs { "flushall", "flushdb", "swapdb", "restore", "migrate", "script|flush",
                             "function|flush", "function|delete", "function|restore" } do
      table.insert(list, 1, extra)
    end
    local host = start(srv, [[
    local passed = {}
    for _, name in ipairs(msg.commands) do
      local cmd, sub = name:match("^([^|]+)|?(.*)$")
      local args = { cmd:upper() }
      if sub ~= "" then args[2] = sub:upper() end
      local ok, err = pcall(ctx.write, ctx, unpack(args))
      if ok or not tostring(err):find("is not available to handlers", 1, true) then
        passed[#passed + 1] = "ctx:write " .. name
      end
      ok, err = pcall(ls.redis.call, unpack(args))
      if ok or not tostring(err):find("is not available to handlers", 1, true) then
        passed[#passed + 1] = "ls.redis " .. name
      end
    end
    ls.log.info("tried", { n = #msg.commands, passed = table.concat(passed, ", ") })
    error("nothing is written")]])
    local json = {}
    for i, name in ipairs(list) do json[i] = string.format("%q", name) end
    srv:cli("XADD", "s", "*", "data", '{"commands":[' .. table.concat(json, ",") .. "]}")
    local rec = host:wait_records({ msg = "tried" }, 1, 20)[1]
    assert.equal(tostring(#list), rec.n)
    assert.equal("", rec.passed or "")
    assert.equal("PONG", srv:cli("PING"))
  end)

  it("what is not administration stays allowed", function()
    local srv = helper.redis_start()
    local host = start(srv, [[
    ls.redis.call("SET", "k", "v")
    local who = ls.redis.call("ACL", "WHOAMI")
    local info = ls.redis.call("INFO", "server")
    local sha = ls.redis.call("SCRIPT", "LOAD", "return 1")
    ctx:write("DEL", "k")
    ls.log.info("allowed", { who = who, info = tostring(#info > 0), sha = sha })
    return ls.ack()]])
    srv:cli("XADD", "s", "*", "data", "{}")
    local rec = host:wait_records({ msg = "allowed" }, 1, 10)[1]
    assert.equal("default", rec.who)
    assert.equal("true", rec.info)
    helper.wait_until(function() return srv:cli("EXISTS", "k") == "0" end, 10, "the DEL written with the ack")
  end)
end)
