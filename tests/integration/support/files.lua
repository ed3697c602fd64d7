-- files: small text and file utilities, the repository root and temp folders
-- (registered for helper.cleanup()).
local ffi = require "ffi"
local sys = require "tests.integration.support.sys"
local registry = require "tests.integration.support.registry"

local C = sys.C
local files = {}

function files.trim(s) return (s:gsub("^%s+", ""):gsub("%s+$", "")) end

function files.shell_quote(s)
  s = tostring(s)
  if s:match("^[%w%._/:=,@%-]+$") then return s end
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

function files.read_file(path)
  local f, err = io.open(path, "rb")
  if not f then error("cannot read " .. tostring(err), 2) end
  local s = f:read("*a")
  f:close()
  return s
end

function files.write_file(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

function files.file_exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

function files.tail(text, n)
  local lines = {}
  for line in ((text or "") .. "\n"):gmatch("([^\n]*)\n") do lines[#lines + 1] = line end
  while #lines > 0 and lines[#lines] == "" do lines[#lines] = nil end
  local first = math.max(1, #lines - n + 1)
  return table.concat(lines, "\n", first)
end

-- The repository root, from this file's location (tests/integration/support/files.lua).
local function repo_root()
  local src = debug.getinfo(1, "S").source:gsub("^@", "")
  if src:sub(1, 1) ~= "/" then
    local p = io.popen("pwd")
    local cwd = files.trim(p:read("*a"))
    p:close()
    src = cwd .. "/" .. src
  end
  local dir = src:gsub("/[^/]*$", "")
  dir = dir .. "/../../.."
  -- normalise a/b/../.. without touching the file system
  local parts = {}
  for part in dir:gmatch("[^/]+") do
    if part == ".." then parts[#parts] = nil
    elseif part ~= "." then parts[#parts + 1] = part end
  end
  return "/" .. table.concat(parts, "/")
end
files.repo_root = repo_root()


local TMP_ROOT = os.getenv("TMPDIR") or "/tmp"

--- Creates a fresh temp folder, removed by helper.cleanup() unless keep is
--- true (then the caller removes it).
function files.tmpdir(tag, keep)
  local template = ffi.new("char[?]", 256)
  ffi.copy(template, string.format("%s/luastream-%s-XXXXXX", TMP_ROOT, tag or "test"))
  local p = C.mkdtemp(template)
  if p == nil then error("mkdtemp failed: " .. ffi.string(C.strerror(ffi.errno())), 2) end
  local dir = ffi.string(p)
  if not keep then registry.dirs[#registry.dirs + 1] = dir end
  return dir
end

--- Writes {name = source} handler files into a fresh folder and returns its path.
function files.handlers_dir(sources)
  local dir = files.tmpdir("handlers")
  for name, src in pairs(sources) do
    files.write_file(dir .. "/" .. name, src)
  end
  return dir
end

--- The 1-based line of the first line in src that contains `needle` (plain).
function files.line_of(src, needle)
  local n = 0
  for line in (src .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    if line:find(needle, 1, true) then return n end
  end
  error("no line contains " .. needle, 2)
end

return files
