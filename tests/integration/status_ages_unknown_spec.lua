-- `luastream status` when an age cannot be worked out: the entry
-- after the group's position (XRANGE) or the server's clock (TIME) refused
-- by the ACL. docs/operations.md: `null` stands for what is not known, 0 for
-- nothing waiting; OLDEST PENDING is the age of the lowest pending id, then
-- its idle time.
local helper = require "tests.integration.helper"
local cjson = require "cjson"

local PW = "pw-review5"

local function url_of(srv, user) return string.format("redis://%s:%s@127.0.0.1:%d", user, PW, srv.port) end

-- The documented payments-status user's commands, minus the one named.
local function status_user(srv, name, drop)
  local args = { "ACL", "SETUSER", name, "reset", "on", ">" .. PW, "-@all" }
  for _, c in ipairs { "+ping", "+info", "+xinfo|stream", "+xinfo|groups", "+xinfo|consumers",
    "+xpending", "+xrange", "+time", "+zcard", "+xlen", "+pttl" } do
    if c ~= drop then args[#args + 1] = c end
  end
  for _, k in ipairs { "%R~payments", "%R~payments:retry:*", "%R~payments:delayed:*",
    "%R~luastream:consumer:{payments}:*" } do
    args[#args + 1] = k
  end
  assert.equal("OK", srv:cli(unpack(args)))
end

-- payments: one entry a minute old delivered (pending), two after it waiting.
local function payments(srv)
  local t = assert(srv:call("TIME"))
  local now = tonumber(t[1]) * 1000
  srv:pipe({
    { "XADD", "payments", (now - 60000) .. "-0", "n", "1" },
    { "XADD", "payments", (now - 50000) .. "-0", "n", "2" },
    { "XADD", "payments", (now - 40000) .. "-0", "n", "3" },
    { "XGROUP", "CREATE", "payments", "ledger", "0" },
    { "XREADGROUP", "GROUP", "ledger", "c1", "COUNT", "1", "STREAMS", "payments", ">" },
  })
end

describe("status with an age it cannot work out", function()
  after_each(helper.cleanup)

  it("gives lag_age_ms null, not 0 (nothing waits), when XRANGE is refused and entries wait", function()
    local srv = helper.redis_start()
    payments(srv)
    status_user(srv, "no-xrange", "+xrange")
    local _, out = helper.luastream("status", "--redis", url_of(srv, "no-xrange"), "--json", "payments")
    local doc = cjson.decode(out)
    local g = doc.groups[1]
    assert.equal(2, g.source.lag, out)
    assert.equal(cjson.null, g.source.lag_age_ms, "2 entries wait, their age unknown: " .. out)
    assert.equal(cjson.null, g.lag_age_ms, "2 entries wait, their age unknown: " .. out)
  end)

  it("does not show the idle time as OLDEST PENDING's age when TIME is refused", function()
    local srv = helper.redis_start()
    payments(srv)
    status_user(srv, "no-time", "+time")
    local code, out, err = helper.luastream("status", "--redis", url_of(srv, "no-time"), "payments")
    assert.equal(1, code, "the unknown ages need attention")
    assert.matches("cannot read the server's clock (TIME)", out .. (err or ""), 1, true)
    local row = assert(out:match("\n(payments%s+ledger[^\n]*)"), out)
    local cols = {}
    for w in row:gmatch("%S+") do cols[#cols + 1] = w end
    -- STREAM GROUP LENGTH LAG PENDING LAG-AGE OLDEST...: the oldest pending
    -- entry is a minute old and was just delivered (idle a few ms).
    local oldest = cols[7]
    assert.is_true(oldest == "-" or row:find("(idle", 1, true) ~= nil,
      "OLDEST PENDING shows " .. oldest .. " for an entry a minute old: its idle time as its age\n" .. out)
  end)
end)
