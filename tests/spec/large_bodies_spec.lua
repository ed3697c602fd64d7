-- Large bodies through a handler on the in-memory broker: JSON bodies of
-- 100 KB and 1 MB (long strings with escapes) and a binary body with NUL
-- bytes reach the handler byte for byte, and come back byte for byte in the
-- reply ls.reply writes (docs/handlers.md, "What a message costs").
local testing = require "luastream.testing"
local cjson = require("cjson.safe").new()

local HERE = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") .. "/fixtures"

local bodies = require "tests.spec.support.bodies"

describe("large bodies", function()
  local app
  before_each(function() app = testing.app(HERE .. "/large_bodies") end)
  after_each(function() app:stop() end)

  -- The reply to entry id, decoded.
  local function reply_to(id)
    for _, e in ipairs(app:entries("bodies.echo")) do
      if e.headers["original-id"] == id then return assert(cjson.decode(e.fields.data)), e.fields.data end
    end
    error("no reply to " .. id)
  end

  for _, size in ipairs({ 100 * 1024, 1024 * 1024 }) do
    it("decodes a JSON body of " .. size .. " bytes and replies with its string byte for byte", function()
      local body, note = bodies.json(size, 7)
      local id = app:command("XADD", "bodies", "*", "data", body)
      app:settle()
      local got = app:received("echo_body")
      assert.equal(1, #got)
      assert.equal("reply", got[1].outcome)
      assert.equal(7, got[1].message.id)
      assert.equal(#note, #got[1].message.note)
      assert.equal(note, got[1].message.note)
      local reply = reply_to(id)
      assert.equal(7, reply.id)
      assert.equal(note, reply.note)
      assert.equal(0, app:xlen("bodies.dead"))
    end)
  end

  it("hands a binary body with NUL bytes over raw and replies with it byte for byte", function()
    local body = bodies.binary(100 * 1024 + 3)
    local id = app:command("XADD", "bodies", "*", "data", body, "content-type", "application/octet-stream")
    app:settle()
    local got = app:received("echo_body")
    assert.equal(1, #got)
    assert.equal("reply", got[1].outcome)
    assert.equal(#body, #got[1].message)
    assert.equal(body, got[1].message)
    local reply, text = reply_to(id)
    assert.equal(body, reply)
    assert.truthy(text:find("\\u0000", 1, true)) -- NUL written escaped, as JSON requires
  end)

  it("keeps handling large and small bodies one after another", function()
    local want = {}
    for i = 1, 6 do
      local body, note = bodies.json(i % 2 == 0 and 64 or 200 * 1024, i)
      want[app:command("XADD", "bodies", "*", "data", body)] = note
    end
    app:settle()
    local got = app:received("echo_body")
    assert.equal(6, #got)
    for _, d in ipairs(got) do
      assert.equal(want[d.id], d.message.note)
      assert.equal(want[d.id], reply_to(d.id).note)
    end
  end)
end)
