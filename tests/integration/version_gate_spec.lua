-- read = "claiming" needs XREADGROUP ... CLAIM (Redis 8.4). On an older server
-- the host stops before it joins any group, with one plain line naming the
-- file, the stream and group, the server and both versions, and the two ways
-- out; claim_fallback = true runs instead. Also the load-time checks of the
-- recovery fields (min_idle, claim_fallback).
local helper = require "tests.integration.helper"

local READY = 'msg="host ready"'

local function server_version(srv)
  return assert(srv:cli("INFO", "server"):match("redis_version:([%d%.]+)"))
end

local function gate_line(file, stream, group, url, version)
  return string.format('%s: read = "claiming" (stream %s, group %s) needs Redis 8.4 or later; %s runs %s; '
    .. 'on this server set claim_fallback = true, or read with read = "new" beside a read = "reclaim" '
    .. 'subscription (see handlers/before-8.4/)', file, stream, group, url, version)
end

-- The stderr lines that are not the host's logfmt records.
local function plain_lines(stderr)
  local out = {}
  for line in stderr:gmatch("[^\n]+") do
    if not line:find("^time=") then out[#out + 1] = line end
  end
  return out
end

local CLAIMING = [[
local ls = require "luastream"

return {
  stream = "orders", group = "billing",
  read = "claiming", min_idle = "30s",%s
  handle = function(order, ctx)
    ls.log.info("order billed", { order_id = order.id })
  end,
}
]]

describe("the claiming read on Redis older than 8.4", function()
  after_each(helper.cleanup)

  it("stops the shipped handlers/ before joining any group, with one line saying why", function()
    local srv = helper.redis_start()
    local version = server_version(srv)
    assert.is_truthy(version:match("^7%."), "these specs expect a Redis 7 server, got " .. version)
    local code, stdout, stderr = helper.luastream("run", "--redis", srv.url, helper.repo_root .. "/handlers",
      { timeout = 20 })
    assert.equal(1, code, stdout .. stderr)
    assert.same({ gate_line("post_payment.lua", "payments", "ledger", srv.url, version) }, plain_lines(stderr))
    assert.equal(0, srv:call("EXISTS", "payments"))
    assert.equal(0, srv:call("EXISTS", "payments.screened"))
    assert.equal(0, srv:call("DBSIZE"))
  end)

  it("names the file, stream and group of the subscription, and never the password", function()
    local secret = "gate-pw-7781"
    local srv = helper.redis_start({ requirepass = secret })
    local version = server_version(srv)
    local dir = helper.handlers_dir({ ["bill_order.lua"] = string.format(CLAIMING, "") })
    -- REDIS_URL: a password in --redis would add a warning line (argv is public)
    local code, stdout, stderr = helper.luastream("run", dir, { timeout = 20, env = { REDIS_URL = srv.url } })
    assert.equal(1, code, stdout .. stderr)
    assert.same({ gate_line("bill_order.lua", "orders", "billing", srv.url_redacted, version) }, plain_lines(stderr))
    assert.is_falsy((stdout .. stderr):find(secret, 1, true), "the password was printed")
    assert.equal(0, srv:call("DBSIZE"))
  end)

  it("runs a claiming subscription with claim_fallback = true", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["bill_order.lua"] = string.format(CLAIMING, "\n  claim_fallback = true,") })
    local code, stdout, stderr = helper.luastream("check", dir)
    assert.equal(0, code, stdout .. stderr)
    local host = helper.host_start({}, { server = srv, dir = dir })
    host:wait_log(READY, 20, { plain = true })
    assert.is_not_nil(srv:group("orders", "billing"), "group billing on orders")
    assert.same({}, plain_lines(host:log()))
    helper.publish(srv, "orders", '{"id":1}')
    host:wait_records({ msg = "order billed", order_id = 1 }, 1, 10, "the order billed")
    assert.equal(0, host:stop())
  end)
end)

describe("recovery fields in handler files", function()
  after_each(helper.cleanup)

  local function handler_file(fields)
    return "local ls = require \"luastream\"\n\nreturn {\n  stream = \"payments\", group = \"ledger\",\n"
      .. fields .. "\n  handle = function() return ls.ack() end,\n}\n"
  end

  -- check's `file:line:` lines for file that name `word`
  local function problems(stderr, file, word)
    local out = {}
    for line in stderr:gmatch("[^\n]+") do
      if line:find(file, 1, true) and line:find(file:gsub("%.", "%%.") .. ":%d+:") and line:find(word, 1, true) then
        out[#out + 1] = line
      end
    end
    return out
  end

  local REFUSED = {
    { what = "claiming without min_idle", fields = '  read = "claiming",', word = "min_idle" },
    { what = "reclaim without min_idle", fields = '  read = "reclaim",', word = "min_idle" },
    { what = "a min_idle that is no duration", fields = '  read = "reclaim", min_idle = "soon",', word = "min_idle" },
    { what = "claim_fallback on a new read", fields = "  claim_fallback = true,", word = "claim_fallback" },
    { what = "claim_fallback on a reclaim read", fields = '  read = "reclaim", min_idle = 500, claim_fallback = true,',
      word = "claim_fallback" },
  }
  for _, case in ipairs(REFUSED) do
    it("check refuses " .. case.what .. ", naming the field", function()
      local dir = helper.handlers_dir({ ["recover.lua"] = handler_file(case.fields) })
      local code, stdout, stderr = helper.luastream("check", dir)
      assert.is_not.equal(0, code)
      assert.is_true(#problems(stdout .. stderr, "recover.lua", case.word) >= 1,
        "no recover.lua:LINE: line naming " .. case.word .. ":\n" .. stdout .. stderr)
    end)
  end

  local ACCEPTED = {
    '  read = "reclaim", min_idle = 500,',
    '  read = "reclaim", min_idle = "500ms",',
    '  read = "claiming", min_idle = "30s",',
    '  read = "claiming", min_idle = 30000, claim_fallback = true,',
  }
  for _, fields in ipairs(ACCEPTED) do
    it("check accepts" .. fields, function()
      local dir = helper.handlers_dir({ ["recover.lua"] = handler_file(fields) })
      local code, stdout, stderr = helper.luastream("check", dir)
      assert.equal(0, code, stdout .. stderr)
    end)
  end
end)
