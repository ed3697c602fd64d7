-- --log-format json against the real binary and redis-server: every line the
-- host writes is one JSON object (parsed here with cjson), with logfmt's
-- fields in logfmt's order, numbers as numbers, a handler's odd values
-- (quotes, newlines, invalid UTF-8, tables, fields named like the host's
-- own) kept valid and unambiguous; LUASTREAM_LOG_FORMAT does the same, and
-- without either the log stays logfmt (docs/operations.md, "Logs").
local helper = require "tests.integration.helper"
local cjson = require "cjson"

local HANDLER = [[
local ls = require "luastream"
return {
  stream = "payments", group = "ledger",
  handle = function(p)
    if p.fail then error("boom\nsecond line") end
    if p.odd then
      ls.log.warn("odd values", {
        amount = 12.5, count = 3, big = 2 ^ 53, negative = -7,
        text = 'say "hi"\\back\nnext\tline\0end',
        bad = "a\255b\192\175c",
        tbl = { a = 1, list = { "x", "y" } },
        msg = "mine", level = "shadow", time = "then", flag = true, inf = math.huge,
        digits = "42",
      })
    else
      ls.log.info("payment posted", { payment_id = p.id })
    end
    return ls.ack()
  end,
}
]]

local TIME = "^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d%.%d%d%dZ$"
local LEVELS = { debug = true, info = true, warn = true, error = true }

-- Every line of text parsed as a JSON object with time, level, msg first (and
-- handler between level and msg when there is one); returns the objects.
local function parse_all(text)
  local out = {}
  assert.equal("\n", text:sub(-1), "the log ends with a whole line")
  for line in text:gmatch("([^\n]*)\n") do
    local ok, obj = pcall(cjson.decode, line)
    assert(ok and type(obj) == "table", "not a JSON object: " .. line)
    assert.truthy(line:find('^{"time":"[^"]*","level":"[a-z]*",'), line)
    if obj.handler then
      assert.truthy(line:find('^{"time":"[^"]*","level":"[a-z]*","handler":"[^"]*","msg":'), line)
    else
      assert.truthy(line:find('^{"time":"[^"]*","level":"[a-z]*","msg":'), line)
    end
    assert.truthy(obj.time:find(TIME), line)
    assert.truthy(LEVELS[obj.level], line)
    assert.equal("string", type(obj.msg), line)
    obj._line = line
    out[#out + 1] = obj
  end
  return out
end

local function find(objs, msg)
  local out = {}
  for _, o in ipairs(objs) do
    if o.msg == msg then out[#out + 1] = o end
  end
  return out
end

describe("JSON logs", function()
  after_each(helper.cleanup)

  it("writes every line as one JSON object, numbers as numbers, odd values kept valid", function()
    local srv = helper.redis_start()
    local host = helper.host_start({ "--log-format", "json" },
      { server = srv, dir = helper.handlers_dir({ ["post.lua"] = HANDLER }) })
    host:wait_log('"msg":"host ready"', 20, { plain = true })
    helper.publish(srv, "payments", '{"id":"p-1"}')
    helper.publish(srv, "payments", '{"id":"p-2","odd":true}')
    helper.publish(srv, "payments", '{"id":"p-3","fail":true}')
    helper.publish(srv, "payments", '{"id":"p-4"}')
    host:wait_log('"payment_id":"p-4"', 20, { plain = true })
    host:wait_log('"msg":"handler failed', 20, { plain = true })
    assert.equal(0, host:stop())

    local objs = parse_all(host:log())
    local ready = find(objs, "host ready")[1]
    assert.equal(1, ready.subscriptions) -- a number the host counted
    assert.equal("info", ready.level)
    assert.is_nil(ready.handler)
    assert.truthy(ready._line:find('"subscriptions":1,', 1, true), ready._line)

    local posted = find(objs, "payment posted")
    assert.equal(2, #posted)
    assert.equal("post", posted[1].handler)
    assert.equal("p-1", posted[1].payment_id)
    assert.equal("string", type(posted[1].version))
    -- the same fields in the same order as logfmt: the handler's, then version
    assert.truthy(posted[1]._line:find('"msg":"payment posted","payment_id":"p-1","version":"', 1, true),
      posted[1]._line)

    local odd = find(objs, "odd values")[1]
    assert.equal("warn", odd.level)
    assert.equal(12.5, odd.amount)
    assert.equal(3, odd.count)
    assert.equal(2 ^ 53, odd.big)
    assert.equal(-7, odd.negative)
    assert.truthy(odd._line:find('"big":9007199254740992,', 1, true), odd._line)
    assert.equal("42", odd.digits) -- a Lua string stays a string
    assert.equal('say "hi"\\back\nnext\tline\0end', odd.text)
    -- bytes that are not UTF-8 become U+FFFD, one per byte
    assert.equal("a\239\191\189b\239\191\189\239\191\189c", odd.bad)
    assert.equal("string", type(odd.tbl)) -- a table is logged as its JSON text
    assert.same({ a = 1, list = { "x", "y" } }, cjson.decode(odd.tbl))
    assert.equal("true", odd.flag)
    assert.equal("string", type(odd.inf)) -- no JSON number for it
    -- fields named like the host's own are renamed, the host's keep theirs
    assert.equal("odd values", odd.msg)
    assert.equal("mine", odd["fields.msg"])
    assert.equal("warn", odd.level)
    assert.equal("shadow", odd["fields.level"])
    assert.equal("then", odd["fields.time"])
    assert.truthy(odd.time:find(TIME))
    -- and no key twice on the line (cjson would keep the last silently)
    local seen = {}
    for key in odd._line:gmatch('[{,]"([^"]*)":') do
      assert.is_nil(seen[key], "key twice: " .. key)
      seen[key] = true
    end

    local failed = find(objs, "handler failed, entry left pending")[1]
    assert.equal("error", failed.level)
    assert.truthy(failed.error:find("boom\nsecond line", 1, true), failed.error)
    assert.truthy(#find(objs, "host stopped") == 1)
  end)

  it("LUASTREAM_LOG_FORMAT=json does the same; without it the log stays logfmt", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["post.lua"] = HANDLER })
    local json_host = helper.host_start({}, { server = srv, dir = dir,
      env = { LUASTREAM_LOG_FORMAT = "json" } })
    json_host:wait_log('"msg":"host ready"', 20, { plain = true })
    local default_host = helper.host_start({ "--consumer", "plain" }, { server = srv, dir = dir })
    default_host:wait_log('msg="host ready"', 20, { plain = true })
    helper.publish(srv, "payments", '{"id":"p-1"}')
    helper.publish(srv, "payments", '{"id":"p-2"}')
    helper.wait_until(function()
      local info = srv:call("XINFO", "GROUPS", "payments")[1]
      return info.pending == 0 and info["last-delivered-id"] ~= "0-0"
    end, 20, "both entries handled")
    assert.equal(0, json_host:stop())
    assert.equal(0, default_host:stop())

    parse_all(json_host:log())
    for _, line in ipairs(default_host:lines()) do
      assert.truthy(line:find("^time=%d%d%d%d%-%d%d%-%d%dT[%d:.]*Z level=%a+ "), line)
    end
    local ready = default_host:records({ msg = "host ready" })[1]
    assert.equal("1", ready.subscriptions)
  end)
end)
