-- The fields of a handler file are defined once, in luastream.handler
-- (FIELDS: name, check, default). docs/handlers.md's field table must name
-- the same fields with the same defaults.
local handler = require "luastream.handler"

local function read_doc(path)
  local f = assert(io.open(path, "r"))
  local text = f:read("*a")
  f:close()
  return text
end

-- { name = default column text } of the table under "## Fields".
local function documented_fields()
  local text = read_doc("docs/handlers.md")
  local section = assert(text:match("\n## Fields\n(.-)\n## "), "docs/handlers.md has no ## Fields section")
  local rows = {}
  for name, default in section:gmatch("\n| `([%w_]+)` | [^|]+ | ([^|]+) |") do
    rows[name] = default:match("^%s*(.-)%s*$")
  end
  return rows
end

-- The default column as a value: `"new"` -> "new", 100 -> 100, false ->
-- false; "required" -> required; anything else (none, generated, ...) -> nil.
local function parse_default(text)
  if text == "required" then return nil, true end
  local quoted = text:match('^`"(.*)"`$')
  if quoted then return quoted end
  if text == "false" or text == "`false`" then return false end
  if text == "true" or text == "`true`" then return true end
  local n = tonumber(text)
  if n then return n end
  return nil
end

describe("handler fields", function()
  local documented = documented_fields()

  it("docs/handlers.md names every field luastream.handler knows, and no other", function()
    local known, listed = {}, {}
    for _, f in ipairs(handler.FIELDS) do known[#known + 1] = f[1] end
    for name in pairs(documented) do listed[#listed + 1] = name end
    table.sort(known)
    table.sort(listed)
    assert.same(known, listed)
  end)

  it("docs/handlers.md gives each field's default as luastream.handler does", function()
    for _, f in ipairs(handler.FIELDS) do
      local default, required = parse_default(documented[f[1]])
      assert.equal(f.required == true, required == true, f[1] .. ": required")
      assert.equal(f.default, default, f[1] .. ": default")
    end
  end)
end)
