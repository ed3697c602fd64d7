-- Large bodies against the real binary and redis-server: JSON bodies of
-- 100 KB and 1 MB and a binary body with NUL bytes (content-type not JSON)
-- reach the handler and come back in its ls.reply byte for byte, read in
-- many socket reads each, one after another and between small ones. The
-- comparison runs inside Redis (its cjson decodes the reply), so no byte
-- passes through redis-cli's text output.
local helper = require "tests.integration.helper"
local bodies = require "tests.spec.support.bodies"

local READY = 'msg="host ready"'

-- Replies with what it got: the note of a JSON body, or the raw string of a
-- binary one; its length goes in a header, as the handler counted it.
local ECHO = [[
local ls = require "luastream"
return {
  stream = "bodies", group = "echo", reply_to = "bodies.echo", dead_letter = "bodies.dead",
  max_body = 4 * 1024 * 1024,
  handle = function(m)
    local s = type(m) == "string" and m or m.note
    return ls.reply({ value = s }, { headers = { ["seen-bytes"] = #s } })
  end,
}
]]

-- For every reply: its original id, whether its decoded value equals the
-- string kept under expect:<original id>, that string's length, and the
-- length the handler saw.
local CHECK = [=[
local out = {}
for _, e in ipairs(redis.call('XRANGE', KEYS[1], '-', '+')) do
  local f = {}
  for i = 1, #e[2], 2 do f[e[2][i]] = e[2][i + 1] end
  local want = redis.call('GET', 'expect:' .. f['original-id'])
  local got = cjson.decode(f.data).value
  out[#out + 1] = { f['original-id'], got == want and 'same' or 'different', #want, f['seen-bytes'] }
end
return out
]=]

describe("large bodies", function()
  after_each(helper.cleanup)

  it("go through decode and ls.reply byte for byte", function()
    local srv = helper.redis_start()
    local host = helper.host_start({}, { server = srv, dir = helper.handlers_dir({ ["echo.lua"] = ECHO }) })
    host:wait_log(READY, 20, { plain = true })
    local cases = {}
    local function add(id, body, value, binary)
      cases[#cases + 1] = { id = id, len = #value }
      local cmd = { "XADD", "bodies", id, "data", body }
      if binary then cmd[6], cmd[7] = "content-type", "application/octet-stream" end
      srv:pipe({ { "SET", "expect:" .. id, value }, cmd })
    end
    add("1-1", bodies.json(100 * 1024))
    add("1-2", bodies.json(1024 * 1024))
    add("1-3", '{"note":"small"}', "small")
    local bin = bodies.binary(100 * 1024 + 3)
    add("1-4", bin, bin, true)
    add("1-5", bodies.json(1024 * 1024 - 1))
    add("1-6", '{"note":"small again"}', "small again")
    helper.wait_until(function()
      local n = srv:xlen("bodies.echo")
      return n >= #cases, n .. " replies"
    end, 30, #cases .. " replies on bodies.echo")
    local got = srv:call("EVAL", CHECK, 1, "bodies.echo")
    assert.equal(#cases, #got)
    for i, c in ipairs(cases) do
      assert.same({ c.id, "same", c.len, tostring(c.len) }, got[i])
    end
    assert.equal(0, srv:xlen("bodies.dead"))
    assert.same({}, (srv:pending_ids("bodies", "echo")))
    assert.equal(0, host:stop())
  end)
end)
