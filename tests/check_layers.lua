-- check_layers.lua BUILD_DIR: checks the layering of host/ on the objects
-- the build made (docs/architecture.md).
--
--   1. a layer calls only the layers below it (ALLOWED);
--   2. no two files call each other, directly or round a longer circle;
--   3. hiredis and OpenSSL are called from broker/ only, libcurl from http/ only,
--      http-parser from cli/console_http.c only, libpq
--      from pg/ only, the Lua C API from runtime/ only
--      (and from the test-only memredis/ and testing/, which speak Lua by
--      nature).
--
-- The compiler already refuses a layer's #include of a header its CMake
-- target does not link; this check sees what the headers cannot: calls.
-- Works on `nm` output, so it judges the code as built, inline functions of
-- headers excepted. Prints each violation; exits 1 if there is any.

local build = assert(arg[1], "usage: luajit tests/check_layers.lua BUILD_DIR")

local ALLOWED = {
  base = {},
  broker = { base = true },
  http = {},
  pg = {},
  runtime = { base = true, broker = true, http = true, pg = true },
  consumer = { base = true, broker = true, runtime = true },
  cli = { base = true, broker = true, http = true, pg = true, runtime = true, consumer = true },
  memredis = { base = true, broker = true },
  testing = { base = true, broker = true, http = true, pg = true, runtime = true, consumer = true, memredis = true },
}
local FOREIGN = {
  { pattern = "^redis", what = "hiredis", layers = { broker = true } },
  { pattern = "^curl_", what = "libcurl", layers = { http = true } },
  { pattern = "^SSL_", what = "OpenSSL", layers = { broker = true } },
  { pattern = "^X509_", what = "OpenSSL", layers = { broker = true } },
  { pattern = "^PQ", what = "libpq", layers = { pg = true } },
  -- the web console's HTTP server, the only HTTP server that parses headers
  { pattern = "^http_parser", what = "http-parser", files = { ["cli/console_http.c"] = true } },
  { pattern = "^lua[L_J]", what = "the Lua C API",
    layers = { runtime = true, memredis = true, testing = true } },
}

local function lines(cmd)
  local p = assert(io.popen(cmd))
  local out = {}
  for l in p:lines() do out[#out + 1] = l end
  p:close()
  return out
end

-- Every object of host/, as "layer/file.c", with what it defines and uses:
-- the members of the layers' libraries (never a stale object of a deleted
-- file) and the objects of the two programs' own sources.
local objects, defined_in, by_name = {}, {}, {}
local function add(layer, file, nm_line)
  local name = layer .. "/" .. file
  local o = by_name[name]
  if not o then
    o = { name = name, layer = layer, uses = {} }
    by_name[name] = o
    objects[#objects + 1] = o
  end
  local sym, kind = nm_line:match("^(%S+) (%a)")
  if kind == "U" then
    o.uses[#o.uses + 1] = sym
  elseif kind and kind:match("[TDBRVWGS]") then
    defined_in[sym] = o
  end
end
local sources = lines("find '" .. build .. "/host' -name 'libls_*.a' | sort")
for _, own in ipairs({ "cli/CMakeFiles/luastream.dir/main.c.o",
                       "testing/CMakeFiles/luastream_testing.dir/testing.c.o" }) do
  sources[#sources + 1] = build .. "/host/" .. own
end
for _, path in ipairs(sources) do
  local layer = path:match("/host/([%w_]+)/")
  for _, l in ipairs(lines("nm -P -A '" .. path .. "' 2>/dev/null")) do
    -- "lib.a[file.c.o]: sym T ..." or "file.c.o: sym T ..."
    local member, rest = l:match("^%S-%[(.-)%.o%]: (.*)$")
    if not member then member, rest = l:match("^%S-([^/%s]+)%.o: (.*)$") end
    if member then add(layer, member, rest) end
  end
end
if #objects == 0 then
  io.stderr:write("check_layers: no libraries under " .. build .. "/host (build first)\n")
  os.exit(1)
end

local problems = {}
local function problem(fmt, ...) problems[#problems + 1] = string.format(fmt, ...) end

-- Rules 1 and 3, and the file graph for rule 2.
for _, o in ipairs(objects) do
  o.calls, o.seen = {}, {}
  for _, sym in ipairs(o.uses) do
    local to = defined_in[sym]
    if to and to ~= o then
      if to.layer ~= o.layer and not (ALLOWED[o.layer] or {})[to.layer] then
        problem("%s calls %s in %s: %s/ may not use %s/", o.name, sym, to.name, o.layer, to.layer)
      end
      if not o.seen[to] then
        o.seen[to] = sym
        o.calls[#o.calls + 1] = to
      end
    elseif not to then
      for _, f in ipairs(FOREIGN) do
        if sym:match(f.pattern) and not (f.layers and f.layers[o.layer] or f.files and f.files[o.name]) then
          problem("%s calls %s (%s) from %s/", o.name, sym, f.what, o.layer)
        end
      end
    end
  end
end

-- Rule 2: strongly connected components (Tarjan) of more than one file.
local index, low, onstack, stack, next_index = {}, {}, {}, {}, 0
local function connect(v)
  index[v], low[v] = next_index, next_index
  next_index = next_index + 1
  stack[#stack + 1] = v
  onstack[v] = true
  for _, w in ipairs(v.calls) do
    if not index[w] then
      connect(w)
      low[v] = math.min(low[v], low[w])
    elseif onstack[w] then
      low[v] = math.min(low[v], index[w])
    end
  end
  if low[v] == index[v] then
    local ring = {}
    repeat
      local w = table.remove(stack)
      onstack[w] = false
      ring[#ring + 1] = w
    until w == v
    if #ring > 1 then
      local parts = {}
      for _, a in ipairs(ring) do
        for _, b in ipairs(a.calls) do
          for _, c in ipairs(ring) do
            if b == c then parts[#parts + 1] = a.name .. " -> " .. b.name .. " (" .. a.seen[b] .. ")" end
          end
        end
      end
      table.sort(parts)
      problem("files that call each other in a circle:\n    %s", table.concat(parts, "\n    "))
    end
  end
end
for _, o in ipairs(objects) do
  if not index[o] then connect(o) end
end

for _, p in ipairs(problems) do print("check_layers: " .. p) end
print(string.format("check_layers: %d objects, %d problem(s)", #objects, #problems))
os.exit(#problems == 0 and 0 or 1)
