-- luastream.handler's validate(): the checks of what a handler file returns,
-- with the file's line of every problem, and the spec it makes (defaults
-- filled in). Called directly, as the host calls it at load: the value the
-- chunk returned, the path, and the source the host read (the file is not
-- read again; PATH below does not exist).
local handler = require "luastream.handler"

local PATH = "/nonexistent/handlers/h.lua"

local function at(line, msg) return string.format("%s:%d: %s", PATH, line, msg) end

-- Runs source as a handler file's chunk and validates what it returned.
local function validate(source)
  local chunk = assert(loadstring(source, "@" .. PATH))
  return pcall(handler.validate, chunk(), PATH, source)
end

local function problems(source)
  local ok, err = validate(source)
  assert.is_false(ok, "expected validate to refuse:\n" .. source)
  return err
end

local function spec_of(source)
  local ok, spec = validate(source)
  assert.is_true(ok, tostring(spec))
  return spec
end

local MINIMAL = 'return { stream = "payments", group = "ledger", handle = function() end }\n'

describe("validate", function()
  it("fills every default", function()
    local spec = spec_of(MINIMAL)
    assert.equal("payments", spec.stream)
    assert.equal("ledger", spec.group)
    assert.equal("function", type(spec.handle))
    assert.equal("new", spec.read)
    assert.equal("new", spec.start)
    assert.is_nil(spec.start_at)
    assert.is_nil(spec.consumer)
    assert.is_nil(spec.reply_to)
    assert.is_nil(spec.min_idle)
    assert.equal(100, spec.batch)
    assert.equal(1, spec.workers)
    assert.is_false(spec.by_key)
    assert.equal(1048576, spec.max_body)
    assert.is_false(spec.claim_fallback)
    assert.equal(10, spec.max_deliveries) -- the default cap
    assert.is_nil(spec.dead_letter)
  end)

  it("keeps the values a file gives", function()
    local spec = spec_of([[
return { stream = "in", group = "grp",
  consumer = "me", start = "beginning", start_at = "5-0",
  reply_to = "out", batch = 7, workers = 3, by_key = true,
  max_body = 10, read = "claiming", min_idle = "30s", claim_fallback = true,
  max_deliveries = 3, dead_letter = "in.dead",
  handle = function() end }
]])
    assert.same({ "in", "grp", "me", "beginning", "5-0", "out", 7, 3, true, 10, "claiming", true, 3, "in.dead" },
      { spec.stream, spec.group, spec.consumer, spec.start, spec.start_at, spec.reply_to, spec.batch,
        spec.workers, spec.by_key, spec.max_body, spec.read, spec.claim_fallback, spec.max_deliveries,
        spec.dead_letter })
    assert.equal(30000, spec.min_idle) -- in ms
  end)

  it("turns max_deliveries = false into no cap", function()
    local spec = spec_of('return { stream = "s", group = "g", handle = function() end, max_deliveries = false }\n')
    assert.is_nil(spec.max_deliveries)
    spec = spec_of('return { stream = "s", group = "g", handle = function() end, max_deliveries = 1 }\n')
    assert.equal(1, spec.max_deliveries)
    assert.is_nil(spec.dead_letter)
    spec = spec_of('return { stream = "s", group = "g", handle = function() end, dead_letter = "d" }\n')
    assert.equal(10, spec.max_deliveries)
    assert.equal("d", spec.dead_letter)
  end)

  it("reads reclaim with a min_idle in ms", function()
    local spec = spec_of('return { stream = "s", group = "g", handle = function() end,\n' ..
      '  read = "reclaim", min_idle = 500 }\n')
    assert.equal("reclaim", spec.read)
    assert.equal(500, spec.min_idle)
    assert.is_false(spec.claim_fallback)
  end)

  it("points a missing field at the return", function()
    assert.equal(at(2, "missing required field 'handle' (a handler file sets exactly one of " ..
      "'handle', 'handle_batch', 'tick')"), problems([[
-- no handle
return {
  stream = "s",
  group = "g",
}
]]))
  end)

  it("names an unknown field at its line", function()
    assert.equal(at(5, "unknown field 'colour'"), problems([[
return {
  stream = "s",
  group = "g",
  handle = function() end,
  colour = "red",
}
]]))
  end)

  it("finds a field name with pattern characters", function()
    assert.equal(at(3, "unknown field 'tag['"), problems([[
return {
  stream = "s", group = "g", handle = function() end,
  ["tag["] = 1,
}
]]))
  end)

  it("refuses wrong types", function()
    assert.equal(at(4, "field 'batch' must be a positive integer"), problems([[
return {
  stream = "s",
  group = "g",
  batch = "ten",
  handle = function() end,
}
]]))
    assert.equal(at(3, "field 'by_key' must be true or false"), problems([[
return {
  stream = "s", group = "g", handle = function() end,
  by_key = 1,
}
]]))
    assert.equal(at(3, "field 'handle' must be a function"), problems([[
return {
  stream = "s", group = "g",
  handle = "not a function",
}
]]))
    assert.equal(at(3, 'field \'start\' must be "new", "beginning" or a stream id such as ' ..
      '"1700000000000-0", got "yesterday"'), problems([[
return {
  stream = "s", group = "g", handle = function() end,
  start = "yesterday",
}
]]))
  end)

  it("refuses a file that returns no table", function()
    assert.equal(at(3, "a handler file must return a table with stream, group and handle, got number"),
      problems("-- returns a number\nlocal x = 41\nreturn x + 1\n"))
    assert.equal(at(1, "a handler file must return a table with stream, group and handle, got nil"),
      problems("local x = 1\n"))
  end)

  it("wants min_idle for the claiming read modes, and claim_fallback only on claiming", function()
    assert.equal(at(3, 'read = "claiming" needs min_idle: how long an entry stays pending before ' ..
      'it counts as abandoned (ms, or a string such as "30s"); it has no default'), problems([[
return {
  stream = "s", group = "g", handle = function() end,
  read = "claiming",
}
]]))
    assert.equal(at(3, "field 'claim_fallback' only applies to read = \"claiming\""), problems([[
return {
  stream = "s", group = "g", handle = function() end,
  claim_fallback = true,
}
]]))
  end)

  it("reads max_run as a duration, on claiming and reclaim only, at least 1 ms", function()
    local spec = spec_of([[
return {
  stream = "s", group = "g", handle = function() end,
  read = "reclaim", min_idle = "30s", max_run = "10m",
}
]])
    assert.equal(600000, spec.max_run)
    assert.is_nil(spec_of(MINIMAL).max_run)
    assert.equal(at(3, "field 'max_run' needs min_idle: it ends the host's keeping of a running " ..
      "entry claimed, which only a subscription with min_idle does (on read = \"new\", give it " ..
      "the min_idle of the group's reclaim reader)"), problems([[
return {
  stream = "s", group = "g", handle = function() end,
  max_run = "10m",
}
]]))
    assert.equal(60000, spec_of([[
return {
  stream = "s", group = "g", handle = function() end,
  min_idle = "30s", max_run = "1m",
}
]]).max_run)
    assert.equal(at(3, "field 'max_run' must be at least 1 ms"), problems([[
return {
  stream = "s", group = "g", handle = function() end, read = "claiming", min_idle = 1000,
  max_run = 0,
}
]]))
    assert.matches("^" .. PATH:gsub("%p", "%%%0") .. ":3: field 'max_run' ", problems([[
return {
  stream = "s", group = "g", handle = function() end, read = "claiming", min_idle = 1000,
  max_run = "10 minutes",
}
]]))
  end)

  it("reports unknown fields first, then the known ones in declaration order", function()
    assert.equal(table.concat({
      at(6, "unknown field 'flavour'"),
      at(2, "missing required field 'stream'"),
      at(4, "field 'batch' must be a positive integer"),
    }, "\n"), problems([[
local ls = require "luastream"
return {
  group = "g",
  batch = 0,
  handle = function() end,
  flavour = "vanilla",
}
]]))
  end)

  it("refuses a bad max_deliveries or dead_letter", function()
    for _, bad in ipairs({ "0", "-1", "2.5", '"3"', "true", "1e10" }) do
      assert.equal(at(3, "field 'max_deliveries' must be a positive integer, or false for no cap"),
        problems("return {\n  stream = \"s\", group = \"g\", handle = function() end,\n" ..
          "  max_deliveries = " .. bad .. ",\n}\n"))
    end
    assert.equal(at(4, "field 'dead_letter' must be a non-empty string"), problems([[
return {
  stream = "s", group = "g", handle = function() end,
  max_deliveries = 5,
  dead_letter = 5,
}
]]))
    assert.equal(at(4, "field 'max_deliveries' must be a positive integer, or false for no cap") .. "\n" ..
      at(3, "field 'dead_letter' must be a non-empty string"), problems([[
return {
  stream = "s", group = "g", handle = function() end,
  dead_letter = "",
  max_deliveries = 0,
}
]]))
  end)

  it("takes line numbers from the source it is given, not from the file", function()
    -- The value comes from one text, the lines from another: validate must
    -- not open PATH (it does not exist) and must use the source given.
    local value = { stream = "s", group = "g", handle = function() end, colour = "red" }
    local ok, err = pcall(handler.validate, value, PATH, "\n\n\n\n\n\n  colour = 1\nreturn t\n")
    assert.is_false(ok)
    assert.equal(at(7, "unknown field 'colour'"), err)
  end)
end)
