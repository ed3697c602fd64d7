-- A PostgreSQL server that refuses the connection: the handler's error is
-- libpq's text on one line with its sentences kept apart, never run together
-- ("Connection refused Is the server running ...").
local helper = require "tests.integration.helper"

describe("ls.pg against a port nothing listens on", function()
  after_each(helper.cleanup)

  it("fails the query with the refusal, its sentences apart", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["q.lua"] = [[
local ls = require "luastream"
return {
  stream = "s", group = "g",
  handle = function(msg)
    local rows, err = ls.pg.query("SELECT 1")
    ls.log.info("queried", { err = tostring(err) })
  end,
}
]] })
    local port = helper.free_port()
    local host = helper.host_start({ "--postgres", "host=127.0.0.1 port=" .. port .. " dbname=x connect_timeout=5" },
      { server = srv, dir = dir })
    host:wait_log('msg="host ready"', 20, { plain = true })
    srv:cli("XADD", "s", "*", "data", "{}")
    local err = host:wait_records({ msg = "queried" }, 1, 20)[1].err
    assert.truthy(err:find("Connection refused. Is the server running", 1, true), err)
    assert.falsy(err:find("refused Is", 1, true), err)
  end)
end)
