-- luastream.message: the message a handle gets (internal): the body the
-- host decoded (core.message), read through the FFI when it is a flat
-- object of a known shape, or, for an entry without a `data` field, its
-- other fields. Runs only inside a host.
local json = require "luastream.json"
local ffi = require "ffi"

-- luastream.core exists only inside a host.
local has_core, core = pcall(require, "luastream.core")
if not has_core then core = nil end
local H = core and core.headers or {}

local M = {}

-- Headers luastream itself writes: not part of a field-table message.
local RESERVED = core and {
  [H.PARTITION_KEY] = true, [H.DELIVERY_COUNT] = true, [H.IDLE_MS] = true,
  [H.ORIGINAL_ID] = true, [H.RETRY_GROUP] = true, [H.CONTENT_TYPE] = true,
}

-- The message of an entry without a `data` field: its other fields, but for
-- the headers luastream writes. nil when nothing is left.
function M.from_fields(ctx)
  local msg, any = {}, false
  for k, v in pairs(ctx.headers) do
    if not RESERVED[k] then msg[k] = v; any = true end
  end
  return any and msg or nil
end

-- of_fields(ctx, spec) -> from_fields's message, or nil, reason (a
-- core.reasons code), text: the entry has nothing to deliver, or spec's
-- schema refuses it (seeing it as the handler would: an object of strings).
function M.of_fields(ctx, spec)
  local msg = M.from_fields(ctx)
  if msg == nil then
    return nil, core.reasons.INPUT_NO_FIELDS, "entry has no data field and no other field to deliver"
  end
  if spec.schema then
    local mismatch = core.schema_mismatch("schema", assert(json.encode(msg)))
    if mismatch then return nil, core.reasons.INPUT_SCHEMA, mismatch end
  end
  return msg
end

-- The message of entry seq through the FFI, when the host has read its body
-- as a flat object of a known shape (luastream_flat, host/runtime/corelib.c): built
-- by a constructor compiled here per shape, so that LuaJIT runs the body's
-- values into the table, and the table into the handler, in one trace.
-- Anything else (and any host whose struct json_flat differs from the one
-- declared here) goes to core.message. With the JIT off (jit.off() in a
-- handler file) the record is read interpreted: correct, slower.
ffi.cdef [[
struct luastream_json_key { const char *s; size_t len; };
struct luastream_json_flat {
  int32_t slot, n;
  uint32_t gen, pad;
  uint8_t type[32];
  double num[32];
  const char *str[32];
  size_t len[32];
  struct luastream_json_key key[32];
};
]]
local FLAT_NUMBER, FLAT_STRING, FLAT_TRUE, FLAT_FALSE = 1, 2, 3, 4
local ffi_string, null = ffi.string, json.null

local function flat_value(r, i)
  local t = r.type[i]
  if t == FLAT_NUMBER then return r.num[i] end
  if t == FLAT_STRING then return ffi_string(r.str[i], r.len[i]) end
  if t == FLAT_TRUE then return true end
  if t == FLAT_FALSE then return false end
  return null
end

-- function(r) return { ["key 1"] = V(r, 0), ... } end, keys in decimal escapes.
local function flat_constructor(r)
  local fields = {}
  for i = 0, r.n - 1 do
    local key = ffi.string(r.key[i].s, r.key[i].len):gsub(".", function(c) return "\\" .. c:byte() end)
    fields[#fields + 1] = '["' .. key .. '"] = V(r, ' .. i .. ')'
  end
  local chunk = "local V = ... return function(r) return { " .. table.concat(fields, ", ") .. " } end"
  return assert(loadstring(chunk, "=(flat message)"))(flat_value)
end

local function flat_reader()
  if ffi.sizeof("struct luastream_json_flat") ~= core.flat_size then return nil end
  local read = ffi.cast("int (*)(void *, double, struct luastream_json_flat *)", core.flat_fn)
  local flat_arg = ffi.cast("void *", core.flat_arg) -- luastream_flat's first argument
  local r = ffi.new("struct luastream_json_flat")
  local made, gens = {}, {}
  return function(seq)
    if read(flat_arg, seq, r) == 0 then return core.message(seq) end
    local slot = r.slot
    if gens[slot] ~= r.gen then
      made[slot], gens[slot] = flat_constructor(r), r.gen
    end
    return made[slot](r)
  end
end

-- reader() -> function(seq) -> the message of entry seq; nil for an entry
-- without a `data` field; nil, reason (a core.reasons code), text for bad
-- input.
function M.reader()
  return flat_reader() or core.message
end

return M
