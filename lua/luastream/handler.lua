-- luastream.handler: the host's Lua half of one handler file (internal).
--
-- validate() turns what a handler file returned into a checked subscription
-- spec, naming the file, line and field of every problem. dispatcher() builds
-- the function each entry's coroutine runs: build ctx around the message the
-- host decoded, call the user's handle, and turn its return value into an
-- outcome the C side applies. Everything here is policy; the mechanism
-- (reads, decoding, lanes, acks) is C.
--
-- FIELDS below is the one definition of a handler file's fields and their
-- defaults: the host copies the validated spec into its C struct without
-- defaults of its own (read_spec in host/runtime/runtime.c, which refuses a
-- field it does not know), and docs/handlers.md's table is checked against it
-- (tests/spec/handler_fields_spec.lua). validate() needs no host, so specs
-- can call it directly; dispatcher() runs only inside one.
local ls = require "luastream"
local json = require "luastream.json"
local table_new = require "table.new"
local ffi = require "ffi"

local M = {}

-- Every subscription caps deliveries unless its file says max_deliveries =
-- false: an entry whose handler always retries cannot spin for ever.
M.DEFAULT_MAX_DELIVERIES = 10
M.MAX_WORKERS = 1024
M.MAX_BATCH = 10000
-- Partitions of a partitioned stream: each is a key with its own read
-- connection in the host.
M.MAX_PARTITIONS = 1024

---------------------------------------------------------------- validation

local function is_stream_id(s)
  return s:match("^%d+$") or s:match("^%d+%-%d+$")
end

local function check_string(v) if type(v) ~= "string" or v == "" then return "must be a non-empty string" end end
local function check_boolean(v) if type(v) ~= "boolean" then return "must be true or false" end end
local function check_function(v) if type(v) ~= "function" then return "must be a function" end end
local function check_count(v)
  if type(v) ~= "number" or v < 1 or v ~= math.floor(v) or v > 1e9 then
    return "must be a positive integer"
  end
end
-- A count with an upper bound the host can afford (each lane holds a Lua
-- coroutine and its stack; a batch is read into memory at once).
local function check_count_upto(max)
  return function(v)
    local why = check_count(v)
    if why then return why end
    if v > max then return string.format("must be at most %d, got %d", max, v) end
  end
end
-- max_deliveries: a positive integer, or false for no cap at all.
local function check_cap(v)
  if v == false then return end
  if check_count(v) then return "must be a positive integer, or false for no cap" end
end
local function check_duration(v)
  local _, why = ls.duration(v)
  return why
end
local function check_start(v)
  if type(v) ~= "string" then return "must be \"new\", \"beginning\" or a stream id" end
  if v ~= "new" and v ~= "beginning" and not is_stream_id(v) then
    return "must be \"new\", \"beginning\" or a stream id such as \"1700000000000-0\", got \"" .. v .. "\""
  end
end
local function check_read(v)
  if v ~= "new" and v ~= "claiming" and v ~= "reclaim" then
    return "must be \"new\", \"claiming\" or \"reclaim\""
  end
end

-- The fields a handler file may set, in the order problems are reported:
-- { name, check, required = true | default = value }. A field without either
-- is optional and absent (nil) when not set.
local FIELDS = {
  { "stream", check_string, required = true },
  { "group", check_string, required = true },
  { "handle", check_function, required = true },
  { "read", check_read, default = "new" },
  { "min_idle", check_duration },
  { "start", check_start, default = "new" },
  { "start_at", check_start },
  { "consumer", check_string },
  { "batch", check_count_upto(M.MAX_BATCH), default = 100 },
  { "workers", check_count_upto(M.MAX_WORKERS), default = 1 },
  { "by_key", check_boolean, default = false },
  { "reply_to", check_string },
  { "max_body", check_count, default = 1048576 },
  { "claim_fallback", check_boolean, default = false },
  { "max_deliveries", check_cap, default = M.DEFAULT_MAX_DELIVERIES },
  { "dead_letter", check_string },
  { "trim", check_boolean, default = false },
  { "trim_max_len", check_count },
  { "reply_max_len", check_count },
  { "dead_letter_max_len", check_count },
  { "partitions", check_count_upto(M.MAX_PARTITIONS) },
}
M.FIELDS = FIELDS
local KNOWN = {}
for _, f in ipairs(FIELDS) do KNOWN[f[1]] = true end

-- The line where `name =` or `["name"] =` first appears, else the line of the
-- last `return`.
local function line_of(source, name)
  local bare, quoted
  if name then
    local escaped = name:gsub("%p", "%%%0")
    bare = "%f[%w_]" .. escaped .. "%s*="
    quoted = "%[%s*[\"']" .. escaped .. "[\"']%s*%]%s*="
  end
  local n, fallback = 0, 1
  for line in (source .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    if name and (line:find(bare) or line:find(quoted)) then return n end
    if line:find("^%s*return%f[%W]") then fallback = n end
  end
  return fallback
end

-- validate(value, path, source) -> spec, or raises "path:line: message"
-- lines. source is the file's text as the host loaded it (for the lines of
-- problems; the file is not read again).
function M.validate(value, path, source)
  source = source or ""
  local problems = {}
  local function problem(field, msg)
    problems[#problems + 1] = string.format("%s:%d: %s", path, line_of(source, field), msg)
  end
  if type(value) ~= "table" then
    problem(nil, "a handler file must return a table with stream, group and handle, got " .. type(value))
    error(table.concat(problems, "\n"), 0)
  end
  for k in pairs(value) do
    if not KNOWN[k] then
      problem(type(k) == "string" and k or nil, string.format("unknown field '%s'", tostring(k)))
    end
  end
  local spec = {}
  for _, f in ipairs(FIELDS) do
    local name, check = f[1], f[2]
    local v = value[name]
    if v == nil then
      if f.required then problem(nil, string.format("missing required field '%s'", name)) end
      v = f.default
    else
      local why = check(v)
      if why then problem(name, string.format("field '%s' %s", name, why)) end
    end
    spec[name] = v
  end
  if spec.min_idle ~= nil and check_duration(spec.min_idle) == nil and ls.duration(spec.min_idle) < 1 then
    problem("min_idle", "field 'min_idle' must be at least 1 ms: with 0 every read claims back " ..
      "what is still running")
  end
  if (spec.read == "claiming" or spec.read == "reclaim") and value.min_idle == nil then
    problem("read", string.format("read = \"%s\" needs min_idle: how long an entry stays pending before " ..
      "it counts as abandoned (ms, or a string such as \"30s\"); it has no default", spec.read))
  end
  if spec.reply_to ~= nil and spec.reply_to == spec.stream then
    problem("reply_to", "field 'reply_to' must name another stream than 'stream': " ..
      "the group would read its own replies")
  end
  if spec.reply_max_len ~= nil and spec.reply_to == nil then
    problem("reply_max_len", "field 'reply_max_len' caps the reply_to stream, and there is no reply_to")
  end
  if spec.dead_letter_max_len ~= nil and spec.dead_letter == nil then
    problem("dead_letter_max_len", "field 'dead_letter_max_len' caps the dead_letter stream, and there is no dead_letter")
  end
  if spec.dead_letter ~= nil and spec.dead_letter == spec.stream then
    problem("dead_letter", "field 'dead_letter' must name another stream than 'stream': " ..
      "a dead letter would be read and dead-lettered again")
  end
  if spec.partitions ~= nil then
    -- The partition's key is "<name>:{p}": its hash tag {p} alone must decide
    -- its Redis Cluster slot, so the names may hold no '{' of their own.
    for _, field in ipairs({ "stream", "reply_to", "dead_letter" }) do
      local name = spec[field]
      if type(name) == "string" and name:find("{", 1, true) then
        problem(field, string.format("field '%s' must not hold '{' in a partitioned handler: " ..
          "partition p reads and writes \"%s:{p}\", whose hash tag is the partition number", field, name))
      end
    end
  end
  if value.claim_fallback ~= nil and spec.read ~= "claiming" then
    problem("claim_fallback", "field 'claim_fallback' only applies to read = \"claiming\"")
  end
  if #problems > 0 then error(table.concat(problems, "\n"), 0) end
  spec.min_idle = spec.min_idle and ls.duration(spec.min_idle) or nil
  if spec.max_deliveries == false then spec.max_deliveries = nil end -- no cap
  return spec
end

---------------------------------------------------------------- dispatch

-- luastream.core exists only inside a host (validate() needs none). The
-- header names are the host's (wire.h, as core.headers); outcomes and the
-- reasons of errors go back to it as its codes (core.outcomes: runtime.h's
-- enum rt_outcome; core.reasons: wire.h's enum wire_reason), never as text.
local has_core, core = pcall(require, "luastream.core")
if not has_core then core = nil end
local H = core and core.headers or {}
local R = core and core.reasons or {}
local O = core and core.outcomes or {}
local encode = json.encode
local DATA, KEY_HEADER = H.DATA, H.PARTITION_KEY
local DELIVERY_COUNT_HEADER, IDLE_MS_HEADER = H.DELIVERY_COUNT, H.IDLE_MS

-- Headers luastream itself writes: not part of a field-table message.
local RESERVED = core and {
  [KEY_HEADER] = true, [DELIVERY_COUNT_HEADER] = true, [IDLE_MS_HEADER] = true,
  [H.ORIGINAL_ID] = true, [H.RETRY_GROUP] = true, [H.CONTENT_TYPE] = true,
}

-- Private ctx key: the job's sequence number (what core.entry asks the host for).
local SEQ = {}

-- Encodes body and options into the flat field list of a new entry.
local function entry_fields(body, opts, fields)
  local data, why = encode(body)
  if not data then return nil, "cannot encode the message as JSON: " .. tostring(why) end
  fields[#fields + 1] = DATA
  fields[#fields + 1] = data
  if opts ~= nil then
    if type(opts) ~= "table" then return nil, "options must be a table" end
    if opts.key ~= nil then
      fields[#fields + 1] = KEY_HEADER
      fields[#fields + 1] = tostring(opts.key)
    end
    if opts.headers ~= nil then
      if type(opts.headers) ~= "table" then return nil, "options.headers must be a table" end
      for k, v in pairs(opts.headers) do
        fields[#fields + 1] = tostring(k)
        fields[#fields + 1] = tostring(v)
      end
    end
  end
  return fields
end

-- The entry's trace carried onto an entry the handler writes because of it
-- (a reply, ctx:publish): a child traceparent (a new parent id, the same
-- trace), unless the handler set one itself. Nothing when the entry came
-- without a valid one.
local TRACEPARENT = "traceparent"
local function add_trace(fields, opts, seq)
  if type(opts) == "table" and type(opts.headers) == "table" and opts.headers[TRACEPARENT] ~= nil then
    return
  end
  local tp = core.traceparent(seq)
  if tp then
    fields[#fields + 1] = TRACEPARENT
    fields[#fields + 1] = tp
  end
end

-- Commands waiting for the outcome (ctx:write, ctx:publish), by ctx: out of
-- the handler's reach, so what reaches the host is always
-- { {cmd, arg, ...}, ... }, strings only.
local pending_writes = setmetatable({}, { __mode = "k" })

local function queue(ctx, command)
  local writes = pending_writes[ctx]
  if not writes then
    writes = {}
    pending_writes[ctx] = writes
  end
  writes[#writes + 1] = command
  return true
end

-- ctx:publish(stream, msg [, {key =, headers =}]) -> true. The entry is
-- written with the handled entry's ack, in one step: only when the handler
-- acks (or replies) and this delivery's ack is the one that removes the
-- entry from the pending list.
-- The key of partition p of a partitioned stream (or of its reply_to,
-- dead_letter): "<name>:{p}", the same as the host's partition_key.
local function partition_key(name, p)
  return name .. ":{" .. p .. "}"
end
M.partition_key = partition_key

-- With {key = K, partitions = N}: the entry goes to partition
-- crc16(K) % N of stream, as `luastream publish --partitions N --key K` does.
local function publish(self, stream, msg, opts)
  if type(stream) ~= "string" or stream == "" then error("ctx:publish: stream must be a non-empty string", 2) end
  if type(opts) == "table" and opts.partitions ~= nil then
    local n = opts.partitions
    if type(n) ~= "number" or n < 1 or n > M.MAX_PARTITIONS or n % 1 ~= 0 then
      error("ctx:publish: partitions must be an integer from 1 to " .. M.MAX_PARTITIONS, 2)
    end
    if opts.key == nil then
      error("ctx:publish: partitions needs a key: the partition is crc16(key) % partitions", 2)
    end
    stream = partition_key(stream, core.partition(tostring(opts.key), n))
  end
  local fields, why = entry_fields(msg, opts, { "XADD", stream, "*" })
  if not fields then error("ctx:publish: " .. why, 2) end
  add_trace(fields, opts, rawget(self, SEQ))
  if #fields > core.command_args_max then
    error("ctx:publish: " .. #fields - 3 .. " fields and values, more than an entry written with the ack may have", 2)
  end
  local other_slot = core.slot_check("ctx:publish", fields, self.stream)
  if other_slot then error(other_slot, 2) end
  return queue(self, fields)
end

-- ctx:write(cmd, ...) -> true. A Redis command written with the ack, under
-- the same rule as ctx:publish: so exactly once per entry and group.
-- Arguments as for ls.redis.call; checked now, so that a mistake raises in
-- the handler rather than failing with the ack.
local function write(self, ...)
  local command = core.command("ctx:write", ...)
  local other_slot = core.slot_check("ctx:write", command, self.stream)
  if other_slot then error(other_slot, 2) end
  return queue(self, command)
end

-- ctx:pg_once(fn) -> true, what fn returned | false | nil, err: fn(tx) in a
-- PostgreSQL transaction that first records the entry (stream, group and
-- the id on the source stream, as ctx.idempotency_key: the same across
-- redeliveries, retry copies and replays), skipped when the entry was
-- recorded before (luastream/pg.lua).
local function pg_once(self, fn)
  if type(self) ~= "table" or rawget(self, SEQ) == nil then
    error("ctx:pg_once: call it with a colon (ctx:pg_once(function(tx) ... end))", 2)
  end
  return require("luastream.pg").once(self.stream, self.group, core.source_id(rawget(self, SEQ)), fn)
end

-- ctx.id, ctx.headers and ctx.fields come from the entry the host holds,
-- built on first use (most handlers read few of them) and kept in ctx from
-- then on. fields = every field as delivered, headers = all but `data`, plus
-- delivery-count and idle-ms for a claimed entry (or one read again from the
-- consumer's own pending list).
local function materialise(ctx)
  local _, fields, deliveries, idle_ms = core.entry(rawget(ctx, SEQ), true)
  local headers, raw = {}, {}
  for i = 1, #fields, 2 do
    local k, v = fields[i], fields[i + 1]
    raw[k] = v
    if k ~= DATA then headers[k] = v end
  end
  if deliveries >= 0 then
    headers[DELIVERY_COUNT_HEADER] = string.format("%d", deliveries)
    headers[IDLE_MS_HEADER] = string.format("%d", idle_ms)
  end
  -- What the handler set itself stays.
  if rawget(ctx, "headers") == nil then rawset(ctx, "headers", headers) end
  if rawget(ctx, "fields") == nil then rawset(ctx, "fields", raw) end
  return headers, raw
end

local function describe(v)
  if type(v) == "table" then
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = tostring(k) end
    table.sort(keys)
    return "a table with keys {" .. table.concat(keys, ", ") .. "}"
  end
  return type(v) .. " " .. tostring(v)
end

-- outcome(result, ctx, spec, seq) -> what the host applies, as codes (O:
-- core.outcomes, R: core.reasons; read by host/runtime/jobs.c):
--   O.ACK [writes] | O.REPLY writes | O.RETRY | O.RETRY_AFTER ms | O.REJECT reason
--   | O.ERROR R.<reason> message
-- writes: { {cmd, arg, ...}, ... }: the handler's ctx:write commands and
-- ctx:publish XADDs, and for O.REPLY the reply's XADD last; written together
-- with the ack. ctx is nil for a handle that takes no ctx (see dispatcher).
local function outcome(result, ctx, spec, seq, reply_to)
  local writes = ctx and pending_writes[ctx]
  if result == nil then return O.ACK, writes end
  if type(result) ~= "table" then
    return O.ERROR, R.BAD_RETURN, "handle returned " .. describe(result) ..
      "; expected ls.ack(), ls.retry(), ls.reply(...) or nothing"
  end
  if result.ack == true then return O.ACK, writes end
  if result.retry == true then return O.RETRY end
  if result.reply ~= nil then
    if not reply_to then
      return O.ERROR, R.BAD_RETURN, "handle returned ls.reply(...) but the handler has no reply_to stream"
    end
    local opts = result.opts
    -- XADD reply_to *, then room for the body, the original id, the key,
    -- the version and the trace: no rehash.
    local fields = table_new(15, 0)
    fields[1], fields[2], fields[3] = "XADD", reply_to, "*"
    if spec.reply_max_len then -- the stream keeps its newest N: older replies go, read or not
      fields[3], fields[4], fields[5] = "MAXLEN", tostring(spec.reply_max_len), "*"
    end
    local why
    fields, why = entry_fields(result.reply, opts, fields)
    if not fields then return O.ERROR, R.BAD_RETURN, "ls.reply: " .. why end
    if #fields + 8 > core.command_args_max then
      return O.ERROR, R.BAD_RETURN, "ls.reply: " .. #fields - 3 .. " fields and values, more than an entry written with the ack may have"
    end
    -- From what the host delivered, not from ctx, which the handler may change:
    -- the id on the source stream, also for a copy read from the retry stream.
    fields[#fields + 1] = H.ORIGINAL_ID
    fields[#fields + 1] = core.source_id(seq)
    -- The partition key as delivered, whatever the handler did to ctx.
    local key = core.field(seq, KEY_HEADER)
    if key ~= nil and not (opts and opts.key ~= nil) then
      fields[#fields + 1] = KEY_HEADER
      fields[#fields + 1] = key
    end
    if spec.version then -- the script version that replied (hot reload)
      fields[#fields + 1] = H.HANDLER_VERSION
      fields[#fields + 1] = spec.version
    end
    add_trace(fields, opts, seq)
    if writes then writes[#writes + 1] = fields else writes = { fields } end
    return O.REPLY, writes
  end
  if result.retry_after ~= nil or result.outcome == "retry_after" then
    local ms, why = ls.duration(result.retry_after)
    if not ms then return O.ERROR, R.BAD_RETURN, "ls.retry_after: delay " .. why end
    return O.RETRY_AFTER, math.floor(ms)
  end
  if result.reject ~= nil then return O.REJECT, tostring(result.reject) end
  return O.ERROR, R.BAD_RETURN, "handle returned " .. describe(result) ..
    "; expected ls.ack(), ls.retry(), ls.reply(...) or nothing"
end

-- The message of an entry without a `data` field: its other fields, but for
-- the headers luastream writes. nil when nothing is left.
local function message_from_fields(ctx)
  local msg, any = {}, false
  for k, v in pairs(ctx.headers) do
    if not RESERVED[k] then msg[k] = v; any = true end
  end
  return any and msg or nil
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

-- ctx.idempotency_key: "stream/group/id", id the entry's id on the source
-- stream, so the same across redeliveries, retry copies, delays and
-- replays of one entry in one group. In the stream and group names "%", "/"
-- and every byte outside printable ASCII are written %XX, so no two entries
-- share a key and the key is a valid header value.
local function escape_name(s)
  return (s:gsub("[%%/%c\128-\255]", function(c) return string.format("%%%02X", c:byte()) end))
end

local function idempotency_key(stream, spec, source_id)
  return escape_name(stream) .. "/" .. escape_name(spec.group) .. "/" .. source_id
end

-- dispatcher(spec, consumer) -> function(seq [, partition]) run in each
-- entry's coroutine; seq names the job for core.message and core.entry,
-- partition (of a partitioned handler) the partition the entry was read
-- from: ctx.stream is then that partition's key, ctx.partition its number,
-- ctx.partition_tag "{p}", and a reply goes to the partition's reply_to.
-- core.message decodes
-- the body in C: the decoded JSON, the text of a body of another
-- content-type, nil for an entry without a `data` field, or nil, reason,
-- text for bad input.
-- A handle declared without a ctx parameter (`function(msg)`) gets none:
-- nothing could read it, so it is not built.
function M.dispatcher(spec, consumer)
  if not core then error("luastream.handler: dispatcher() runs only inside a luastream host", 2) end
  local handle = spec.handle
  local params = debug.getinfo(handle, "u")
  local wants_ctx = params.isvararg or params.nparams >= 2
  -- What ctx offers in one partition (NONE: an unpartitioned handler), and
  -- where its replies go; made on first use.
  local NONE = -1
  local views = {}
  local function view(partition)
    local members = { stream = spec.stream, group = spec.group, consumer = consumer, publish = publish,
                      write = write, pg_once = pg_once, partition_tag = "" }
    local reply_to = spec.reply_to
    if partition ~= NONE then
      members.stream = partition_key(spec.stream, partition)
      members.partition, members.partition_tag = partition, "{" .. partition .. "}"
      reply_to = reply_to and partition_key(reply_to, partition)
    end
    local stream = members.stream
    local Ctx = {
      __index = function(ctx, k)
        if k == "id" then
          local id = core.entry(rawget(ctx, SEQ))
          rawset(ctx, "id", id)
          return id
        end
        if k == "deliveries" then
          local n = core.deliveries(rawget(ctx, SEQ))
          rawset(ctx, "deliveries", n)
          return n
        end
        if k == "idempotency_key" then
          local key = idempotency_key(stream, spec, core.source_id(rawget(ctx, SEQ)))
          rawset(ctx, "idempotency_key", key)
          return key
        end
        if k == "headers" or k == "fields" then
          local headers, raw = materialise(ctx)
          return k == "headers" and headers or raw
        end
        return members[k]
      end,
    }
    local v = { Ctx = Ctx, reply_to = reply_to }
    views[partition] = v
    return v
  end
  local message = flat_reader() or core.message
  return function(seq, partition)
    partition = partition or NONE
    local v = views[partition] or view(partition)
    local msg, reason, text = message(seq)
    if reason then return O.INVALID, reason, text end
    if msg ~= nil and not wants_ctx then return outcome(handle(msg), nil, spec, seq, v.reply_to) end
    local ctx = setmetatable({ [SEQ] = seq }, v.Ctx)
    if msg == nil then
      msg = message_from_fields(ctx)
      if msg == nil then
        return O.INVALID, R.INPUT_NO_FIELDS, "entry has no data field and no other field to deliver"
      end
    end
    return outcome(handle(msg, ctx), ctx, spec, seq, v.reply_to)
  end
end

return M
