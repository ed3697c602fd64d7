-- W3C trace context through the host: an entry's traceparent is carried onto
-- its reply, ctx:publish entries, retry copies and dead letters as a child
-- (same trace, new parent id), and its trace id is on the log lines about
-- the entry. A traceparent that is not valid is
-- producer data like any other: neither logged nor carried.
local testing = require "luastream.testing"

local DIR = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") .. "/fixtures/trace"
local TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
local PARENT = "00f067aa0ba902b7"
local TP = "00-" .. TRACE .. "-" .. PARENT .. "-01"

local function fields_of(app, stream)
  local out = {}
  for _, e in ipairs(app:entries(stream)) do out[#out + 1] = e.fields end
  return out
end

describe("trace context", function()
  local app
  after_each(function() if app then app:stop() end app = nil end)

  it("makes the reply and the published entry children of the entry's trace", function()
    app = testing.app(DIR)
    app:publish("payments", { id = 1 }, { headers = { traceparent = TP } })
    for _, stream in ipairs { "payments.screened", "events" } do
      local f = fields_of(app, stream)[1]
      local trace, parent, flags = f.traceparent:match("^00%-(%x+)%-(%x+)%-(%x%x)$")
      assert.equal(TRACE, trace, stream)
      assert.equal(16, #parent)
      assert.are_not.equal(PARENT, parent, stream .. " keeps the parent id")
      assert.equal("01", flags)
    end
    assert.are_not.equal(fields_of(app, "payments.screened")[1].traceparent,
      fields_of(app, "events")[1].traceparent)
    for _, msg in ipairs { "screening" } do
      assert.equal(TRACE, app:records(msg)[1].trace_id)
    end
  end)

  it("makes a retry copy and a dead letter children of the trace too, and logs the trace id", function()
    app = testing.app(DIR)
    app:publish("payments", { id = 2, op = "retry" }, { headers = { traceparent = TP } })
    app:publish("payments", { id = 3, op = "reject" }, { headers = { traceparent = TP } })
    local copies = fields_of(app, "payments:retry:screen")
    assert.is_true(#copies >= 1)
    local dead = fields_of(app, "payments.dead")[1]
    for _, tp in ipairs { copies[1].traceparent, dead.traceparent } do
      local trace, parent, flags = tp:match("^00%-(%x+)%-(%x+)%-(%x%x)$")
      assert.equal(TRACE, trace)
      assert.are_not.equal(PARENT, parent)
      assert.equal("01", flags)
    end
    assert.are_not.equal(copies[1].traceparent, dead.traceparent)
    -- a delayed entry, back on the retry stream once due
    app:publish("payments", { id = 4, op = "later" }, { headers = { traceparent = TP } })
    app:advance("1s")
    local got = app:received("screen")
    assert.equal(4, got[#got].message.id) -- delivered again, from the retry stream
    local seen = got[#got].headers.traceparent
    assert.equal(TRACE, seen:match("^00%-(%x+)%-"))
    assert.are_not.equal(TP, seen)
    assert.equal(TRACE, app:records("entry retried")[1].trace_id)
    assert.equal(TRACE, app:records("entry dead-lettered")[1].trace_id)
  end)

  it("leaves a traceparent the handler set itself, and ignores one that is not valid", function()
    app = testing.app(DIR)
    app:publish("payments", { id = 4, op = "own" }, { headers = { traceparent = TP } })
    assert.equal("00-" .. string.rep("a", 32) .. "-" .. string.rep("b", 16) .. "-00",
      fields_of(app, "events")[1].traceparent)
    for i, bad in ipairs {
      "00-" .. string.rep("0", 32) .. "-" .. PARENT .. "-01", -- all-zero trace id
      "01-" .. TRACE .. "-" .. PARENT .. "-01",                -- another version
      "00-" .. TRACE:upper() .. "-" .. PARENT .. "-01",        -- upper case
      TP .. "-extra",
      "garbage",
    } do
      app:publish("payments", { id = 10 + i }, { headers = { traceparent = bad } })
    end
    local screened = fields_of(app, "payments.screened")
    for i = 2, #screened do assert.is_nil(screened[i].traceparent) end
    local recs = app:records("screening")
    for i = 2, #recs do assert.is_nil(recs[i].trace_id) end
  end)
end)
