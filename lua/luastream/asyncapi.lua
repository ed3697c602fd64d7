-- luastream.asyncapi: the AsyncAPI 3.0.0 document of a handler directory
-- (`luastream asyncapi DIR`).
--
-- document() builds it from the handler files' validated specs (what
-- luastream.handler_spec.validate returned, the schema tables included),
-- json() and yaml() write it out. The host copies the specs out of each
-- handler's state into the state this runs in (host/runtime/asyncapi.c); the
-- functions here need no host, so specs call them on literal tables.
--
-- What the document says (docs/handlers.md, "The contract"):
--   channels    one per Redis key of a stream: each handler's stream (a
--               partitioned one as "<stream>:{partition_tag}", the parameter
--               being the hash tag "{p}"), its group's retry stream
--               "<stream>:retry:<group>", its reply_to and dead_letter;
--   operations  per handler: <name>.receive (the stream; its reply, when
--               reply_to), <name>.receive-retry and <name>.retry (the retry
--               stream, read and written), <name>.dead-letter;
--   messages    an entry: its `data` field the payload (the handler's schema
--               or reply_schema, else any JSON value), its other fields the
--               headers (those luastream reads and writes, host/base/wire.h).
-- AsyncAPI's Redis bindings (0.1.0) define no fields, so what is luastream's
-- own (the group, the read mode, min_idle, the caps...) is in x-luastream-*
-- extensions: each field of a spec the document does not model otherwise is
-- there as x-luastream-<field> (underscores as dashes, durations in ms with
-- -ms appended), so a new field shows without a change here.
--
-- The text is the same for the same specs: keys are written in a fixed order
-- (AsyncAPI's fields first, the rest sorted), handlers in file order.
local M = {}

M.ASYNCAPI_VERSION = "3.0.0"

-- ---- ordered values ----------------------------------------------------------

-- A table marked MAP has keys that are names (channels, properties): written
-- sorted. Other objects put AsyncAPI's and JSON Schema's fields first (RANK).
-- A table marked ARRAY is an array even when empty.
local MAP, ARRAY = {}, {}
local function map(t) return setmetatable(t or {}, MAP) end
local function array(t) return setmetatable(t or {}, ARRAY) end
M.map, M.array = map, array

local RANK = {}
for i, k in ipairs({
  "asyncapi", "id", "info", "servers", "defaultContentType", "channels", "operations",
  "components", "name", "title", "version", "host", "protocol", "protocolVersion", "pathname",
  "address", "action", "channel", "summary", "description", "messages", "reply", "parameters",
  "security", "contentType", "correlationId", "headers", "payload",
  "location", "$ref", "type", "format", "const", "enum", "default", "pattern", "minimum", "maximum",
  "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "minItems", "maxItems",
  "properties", "required", "additionalProperties", "items", "examples",
}) do RANK[k] = i end

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  local ranked = getmetatable(t) ~= MAP
  table.sort(keys, function(a, b)
    local ra, rb = ranked and RANK[a], ranked and RANK[b]
    if ra and rb then return ra < rb end
    if ra or rb then return ra ~= nil end
    return tostring(a) < tostring(b)
  end)
  return keys
end

-- Whether t is written as an array: marked so, or keys 1..n and n > 0.
local function is_array(t)
  local mt = getmetatable(t)
  if mt == ARRAY then return true end
  if mt == MAP then return false end
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  if n == 0 then return false end
  for i = 1, n do if t[i] == nil then return false end end
  return true
end

-- ---- JSON --------------------------------------------------------------------

local ESCAPES = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f",
                  ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t" }
local function quote(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    return ESCAPES[c] or string.format("\\u%04x", c:byte())
  end) .. '"'
end

-- Integers as integers; other numbers with the fewest digits that read back
-- the same (as luastream's JSON encoder writes them).
local function number(x)
  if x ~= x or x == math.huge or x == -math.huge then
    error("a number that JSON cannot hold: " .. tostring(x), 0)
  end
  if x == math.floor(x) then
    return string.format(math.abs(x) < 2 ^ 63 and "%d" or "%.0f", x)
  end
  for prec = 15, 17 do
    local s = string.format("%." .. prec .. "g", x)
    if prec == 17 or tonumber(s) == x then return s end
  end
end

local function scalar(v)
  local t = type(v)
  if t == "string" then return quote(v) end
  if t == "number" then return number(v) end
  if t == "boolean" then return tostring(v) end
  error("a " .. t .. " value cannot be written", 0)
end

local function json_value(v, indent, out)
  if type(v) ~= "table" then
    out[#out + 1] = scalar(v)
    return
  end
  local inner = indent .. "  "
  if is_array(v) then
    if #v == 0 then out[#out + 1] = "[]" return end
    out[#out + 1] = "["
    for i, x in ipairs(v) do
      out[#out + 1] = (i > 1 and ",\n" or "\n") .. inner
      json_value(x, inner, out)
    end
    out[#out + 1] = "\n" .. indent .. "]"
    return
  end
  local keys = sorted_keys(v)
  if #keys == 0 then out[#out + 1] = "{}" return end
  out[#out + 1] = "{"
  for i, k in ipairs(keys) do
    out[#out + 1] = (i > 1 and ",\n" or "\n") .. inner .. quote(tostring(k)) .. ": "
    json_value(v[k], inner, out)
  end
  out[#out + 1] = "\n" .. indent .. "}"
end

-- json(value) -> text: indented by two spaces, ending with a newline.
function M.json(value)
  local out = {}
  json_value(value, "", out)
  out[#out + 1] = "\n"
  return table.concat(out)
end

-- ---- YAML --------------------------------------------------------------------

-- Plain (unquoted) only what every YAML reader takes as this very string:
-- letters, digits and a few marks, starting with a letter, and none of the
-- words YAML 1.1 reads as booleans or null.
local RESERVED = { ["true"] = 1, ["false"] = 1, ["yes"] = 1, ["no"] = 1, ["on"] = 1, ["off"] = 1,
                   ["y"] = 1, ["n"] = 1, ["null"] = 1 }
local function yaml_string(s)
  if s:match("^[%a][%w_%.%-/]*$") and not RESERVED[s:lower()] then return s end
  return quote(s) -- JSON's escapes are YAML's double-quoted ones
end

local function yaml_scalar(v)
  if type(v) == "string" then return yaml_string(v) end
  return scalar(v)
end

local function empty(v)
  if is_array(v) then return #v == 0 end
  return next(v) == nil
end

-- Lines of v at indent; v a table that is not empty.
local function yaml_block(v, indent, out)
  if is_array(v) then
    for _, x in ipairs(v) do
      if type(x) == "table" and not empty(x) then
        -- the first line of the item goes after "- ", the rest under it
        local first = #out + 1
        yaml_block(x, indent .. "  ", out)
        out[first] = indent .. "- " .. out[first]:sub(#indent + 3)
      else
        out[#out + 1] = indent .. "- " .. (type(x) == "table" and (is_array(x) and "[]" or "{}") or yaml_scalar(x))
      end
    end
    return
  end
  for _, k in ipairs(sorted_keys(v)) do
    local x, key = v[k], indent .. yaml_string(tostring(k)) .. ":"
    if type(x) ~= "table" then
      out[#out + 1] = key .. " " .. yaml_scalar(x)
    elseif empty(x) then
      out[#out + 1] = key .. (is_array(x) and " []" or " {}")
    else
      out[#out + 1] = key
      yaml_block(x, indent .. "  ", out)
    end
  end
end

-- yaml(value) -> text: block style, strings quoted where they need it.
function M.yaml(value)
  local out = {}
  yaml_block(value, "", out)
  out[#out + 1] = ""
  return table.concat(out, "\n")
end

-- ---- names -------------------------------------------------------------------

-- A component or channel id: AsyncAPI's ids are letters, digits, ".", "-"
-- and "_".
local function id_of(text)
  return (text:gsub("[^%w%.%-_]", "_"))
end

-- A JSON pointer's token (RFC 6901).
local function pointer(token)
  return (token:gsub("~", "~0"):gsub("/", "~1"))
end

local function ref(...)
  local parts = { "#" }
  for _, p in ipairs({ ... }) do parts[#parts + 1] = pointer(p) end
  return { ["$ref"] = table.concat(parts, "/") }
end

-- ---- JSON Schema -------------------------------------------------------------

-- The keywords of the subset a schema may use (host/runtime/schema.h,
-- SCHEMA_KEYWORDS; luastream check refuses any other) whose value is a
-- schema, or a list of values; properties maps names to schemas.
local SCHEMA_ONE = { items = true, additionalProperties = true }
local VALUE_LISTS = { required = true, enum = true, examples = true }

-- A handler's `pattern` is a POSIX extended regular expression (as
-- `grep -E` reads it); JSON Schema's are ECMA-262. They agree but for
-- bracket expressions: POSIX classes ([:digit:]) are spelt out, a backslash
-- (literal in POSIX) and a leading "]" are escaped.
local CLASSES = {
  alnum = "A-Za-z0-9", alpha = "A-Za-z", digit = "0-9", lower = "a-z", upper = "A-Z",
  xdigit = "0-9A-Fa-f", space = [[ \t\n\r\f\v]], blank = [[ \t]], cntrl = [[\x00-\x1f\x7f]],
  print = [[\x20-\x7e]], graph = [[\x21-\x7e]], punct = [[!-\/:-@\[-`{-~]],
}
local function ecma_pattern(p)
  local out, i, n = {}, 1, #p
  while i <= n do
    local c = p:sub(i, i)
    if c == "\\" then
      out[#out + 1] = p:sub(i, i + 1)
      i = i + 2
    elseif c ~= "[" then
      out[#out + 1] = c
      i = i + 1
    else
      out[#out + 1] = "["
      i = i + 1
      if p:sub(i, i) == "^" then
        out[#out + 1] = "^"
        i = i + 1
      end
      local first = true
      while i <= n do
        local d = p:sub(i, i)
        local class = p:match("^%[:(%a+):%]", i)
        if d == "]" and not first then break end
        if class and CLASSES[class] then
          out[#out + 1] = CLASSES[class]
          i = i + #class + 4
        elseif d == "\\" or d == "]" or d == "[" then
          out[#out + 1] = "\\" .. d
          i = i + 1
        else
          out[#out + 1] = d
          i = i + 1
        end
        first = false
      end
      out[#out + 1] = "]"
      i = i + 1
    end
  end
  return table.concat(out)
end
M.ecma_pattern = ecma_pattern

-- A JSON value as written: tables copied, arrays and objects told apart.
local function value_of(v)
  if type(v) ~= "table" then return v end
  local out = is_array(v) and array() or {}
  for k, x in pairs(v) do out[k] = value_of(x) end
  return out
end

-- A handler's schema table (JSON Schema) as the document's Schema Object.
local function schema_of(s)
  if type(s) ~= "table" then return s end -- true, false
  local out = {}
  for k, v in pairs(s) do
    if k == "properties" and type(v) == "table" then
      local m = map()
      for name, x in pairs(v) do m[name] = schema_of(x) end
      out[k] = m
    elseif SCHEMA_ONE[k] and type(v) == "table" then
      out[k] = schema_of(v)
    elseif VALUE_LISTS[k] and type(v) == "table" then
      out[k] = setmetatable(value_of(v), ARRAY)
    elseif k == "pattern" and type(v) == "string" then
      out[k] = ecma_pattern(v)
    else
      out[k] = value_of(v)
    end
  end
  return out
end
M.schema = schema_of

-- ---- the parts of a handler --------------------------------------------------

-- Fields the document says through channels and operations; what a handler
-- returns that is no data (handle, a batch handler's function) is skipped
-- by type. version: the file's content hash, which changes with any edit.
local MODELLED = { stream = true, group = true, reply_to = true, dead_letter = true,
                   partitions = true, schema = true, reply_schema = true, version = true,
                   read = true, min_idle = true, by_key = true, max_deliveries = true }
local DURATIONS = { min_idle = true, max_run = true, breaker_within = true, breaker_pause = true,
                    breaker_max_pause = true, batch_wait = true, every = true }

local function ext_name(field)
  return "x-luastream-" .. field:gsub("_", "-") .. (DURATIONS[field] and "-ms" or "")
end

-- A spec's value as an extension's: rates as permits per second and burst.
local function ext_value(v)
  if type(v) == "table" and v.interval and v.burst then
    -- 9 digits: "7/s" is 7, not 7.000000000000001
    return { permits_per_second = tonumber(string.format("%.9g", 1e6 / v.interval)), burst = v.burst }
  end
  return value_of(v)
end

-- Every field of spec not in MODELLED, as x-luastream-<field>, into out.
local function extensions(spec, out)
  for k, v in pairs(spec) do
    local t = type(v)
    if type(k) == "string" and not MODELLED[k] and (t == "string" or t == "number" or
        t == "boolean" or t == "table") then
      out[ext_name(k)] = ext_value(v)
    end
  end
  return out
end

-- The fields of each kind of file (luastream.handler_spec's FIELDS: marked
-- schedule, of scheduled files only; both, of either), since validate fills
-- in the defaults of the other kind's too: {scheduled = the set of a
-- scheduled file's, schedule_only = the set a stream handler leaves out},
-- or nil when FIELDS marks none.
local function kinds_of_fields()
  local ok, hs = pcall(require, "luastream.handler_spec")
  if not ok then return nil end
  local out, marked = { scheduled = {}, schedule_only = {} }, false
  for _, f in ipairs(hs.FIELDS) do
    marked = marked or f.schedule or f.both
    if f.schedule or f.both then out.scheduled[f[1]] = true end
    if f.schedule then out.schedule_only[f[1]] = true end
  end
  return marked and out or nil
end

-- spec without the fields of the other kind of file: a scheduled file's
-- are only those FIELDS marks so (not breaker_* and the like, derived from
-- a stream handler's fields).
local function own_fields(spec, scheduled)
  local kinds = kinds_of_fields()
  if not kinds then return spec end
  local out = {}
  for k, v in pairs(spec) do
    if scheduled and kinds.scheduled[k] or not scheduled and not kinds.schedule_only[k] then
      out[k] = v
    end
  end
  return out
end

-- "<name>:{partition_tag}" for a partitioned handler's key, else name.
local function key_of(name, partitions)
  return partitions and name .. ":{partition_tag}" or name
end

local function tags_of(n)
  local tags = array()
  for p = 0, n - 1 do tags[#tags + 1] = "{" .. p .. "}" end
  return tags
end

-- ---- the document ------------------------------------------------------------

-- document(handlers, opts) -> the document as a table (json() and yaml()
-- write it).
--   handlers: list of {path = "handlers/post_payment.lua", file =
--             "post_payment.lua", name = "post_payment", spec = validated
--             spec}, in file order;
--   opts: {title =, version = (info's), dir = the directory as given,
--          headers = {NAME = "header-name", ...} (host/base/wire.h's, as
--          luastream.core.headers, and TRACEPARENT), reasons = {...} (the
--          dead-letter reasons), server = {...} or nil (see M.server)}.
function M.document(handlers, opts)
  local H = opts.headers
  local channels, operations, messages = map(), map(), map()
  local chan_by_key, taken = {}, {}

  local function unique(base, used)
    local id, n = base, 1
    while used[id] do
      n = n + 1
      id = base .. "_" .. n
    end
    used[id] = true
    return id
  end

  local function header(desc, extra)
    local h = { type = "string", description = desc }
    for k, v in pairs(extra or {}) do h[k] = v end
    return h
  end

  -- The headers of an entry as producers write it, and as luastream reads them.
  local function source_headers(props)
    props[H.PARTITION_KEY] = header("The partition key: with by_key its entries run one at a " ..
      "time in stream order; rate_per_key and max_in_flight_per_key limit each key; " ..
      "producers of a partitioned stream add the entry to partition crc16(key) % partitions.")
    props[H.CONTENT_TYPE] = header("The body's media type; JSON when absent. A handler is " ..
      "given a body of another type as the raw string.")
    props[H.TRACEPARENT] = header("W3C Trace Context: a valid one of version 00 " ..
      "(00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>) gives replies, copies and dead " ..
      "letters a child of it, and log lines its trace id; any other value is data.")
    return props
  end

  local function headers_schema(props, required, desc)
    local s = { type = "object", properties = map(props), additionalProperties = { type = "string" },
                description = desc }
    if required and #required > 0 then
      table.sort(required)
      s.required = array(required)
    end
    return s
  end

  local function generic_payload(what)
    return { description = what .. " The entry's `data` field: JSON, any value." }
  end

  -- The channel of a Redis key (a partitioned one's template), made once.
  local function channel(address, partitions, description)
    local k = address .. "\0" .. (partitions or 0)
    local c = chan_by_key[k]
    if c then
      c.descriptions[description] = true
      return c
    end
    local id = unique(id_of((address:gsub("{partition_tag}", "p"))), taken)
    local obj = { address = address, messages = map() }
    if partitions then
      obj.parameters = map({ partition_tag = {
        description = string.format("The partition's hash tag, {p} for partition p from 0 to " ..
          "%d: the key is in the Redis Cluster slot of p (ctx.partition_tag).", partitions - 1),
        enum = tags_of(partitions),
      } })
      obj["x-luastream-partitions"] = partitions
    end
    c = { id = id, obj = obj, descriptions = { [description] = true }, by_text = {}, nmsg = 0 }
    chan_by_key[k] = c
    channels[id] = obj
    return c
  end

  -- The message m on channel c, shared with an equal one already there:
  -- its reference from an operation.
  local function message(c, m, hint)
    local text = M.json(m)
    local mid = c.by_text[text]
    if not mid then
      c.nmsg = c.nmsg + 1
      mid = unique(c.nmsg == 1 and c.id or c.id .. "." .. id_of(hint), messages)
      m.name = mid
      messages[mid] = m
      c.obj.messages[mid] = ref("components", "messages", mid)
      c.by_text[text] = mid
    end
    return ref("channels", c.id, "messages", mid)
  end

  -- What the readers of each stream declare: a reader without a schema
  -- takes the one schema the others declare (the stream's contract), so a
  -- stream carries one message, not a typed one and an untyped one.
  local declared = {}
  for _, h in ipairs(handlers) do
    local spec = h.spec
    if type(spec.stream) == "string" and type(spec.schema) == "table" then
      local k = key_of(spec.stream, spec.partitions) .. "\0" .. (spec.partitions or 0)
      local d = declared[k] or { n = 0, texts = {} }
      declared[k] = d
      local ok, text = pcall(M.json, schema_of(spec.schema))
      if ok and not d.texts[text] then
        d.texts[text], d.n, d.schema = true, d.n + 1, spec.schema
      end
    end
  end

  local scheduled = map()
  for _, h in ipairs(handlers) do
    local spec, name = h.spec, h.name
    -- a schema the document cannot hold (NaN in an example) is the file's
    for _, field in ipairs({ "schema", "reply_schema" }) do
      local ok, why = pcall(M.json, schema_of(spec[field]))
      if spec[field] ~= nil and not ok then
        error(string.format("%s: field '%s': %s", h.path or h.file, field, why), 0)
      end
    end
    if type(spec.stream) ~= "string" then
      -- no stream (a scheduled handler): listed, with its own fields
      scheduled[name] = extensions(own_fields(spec, true), { ["x-luastream-handler"] = h.file })
    else
      local P = spec.partitions
      local stream_key = key_of(spec.stream, P)
      local stream_ch = channel(stream_key, P, P
        and string.format("The stream %s, partitioned over %d keys %s:{0} ... %s:{%d}.",
          spec.stream, P, spec.stream, spec.stream, P - 1)
        or string.format("The stream %s.", spec.stream))
      local d = declared[stream_key .. "\0" .. (P or 0)]
      local schema = spec.schema or (d and d.n == 1 and d.schema)
      local payload = schema and schema_of(schema)
        or generic_payload("What producers add to " .. spec.stream .. " (an entry without " ..
          "`data` is handed to the handler as the table of its fields).")
      local entry_ref = message(stream_ch, {
        title = "An entry of " .. spec.stream,
        contentType = "application/json",
        headers = headers_schema(source_headers({}), nil,
          "The entry's fields other than `data`, as strings; luastream reads these."),
        payload = payload,
      }, name)

      local op = {
        action = "receive",
        channel = ref("channels", stream_ch.id),
        title = string.format("%s: group %s reads %s", name, spec.group, spec.stream),
        messages = array({ entry_ref }),
        ["x-luastream-handler"] = h.file,
        ["x-luastream-group"] = spec.group,
        ["x-luastream-read"] = spec.read,
        ["x-luastream-by-key"] = spec.by_key,
        ["x-luastream-max-deliveries"] = spec.max_deliveries or false,
      }
      if spec.min_idle then op["x-luastream-min-idle-ms"] = spec.min_idle end
      if spec.by_key or spec.rate_per_key or spec.max_in_flight_per_key then
        op["x-luastream-partition-key-header"] = H.PARTITION_KEY
      end
      extensions(own_fields(spec, false), op)

      -- the reply: ls.reply(body) on reply_to, with the ack
      if spec.reply_to then
        local reply_key = key_of(spec.reply_to, P)
        local reply_ch = channel(reply_key, P, string.format("Replies on %s.", spec.reply_to))
        local reply_ref = message(reply_ch, {
          title = "A reply on " .. spec.reply_to,
          contentType = "application/json",
          headers = headers_schema({
            [H.ORIGINAL_ID] = header("The id, on its source stream, of the entry answered."),
            [H.PARTITION_KEY] = header("The answered entry's partition key, unless the reply " ..
              "names its own."),
            [H.HANDLER_VERSION] = header("The version (content hash) of the handler file that " ..
              "replied."),
            [H.TRACEPARENT] = header("A child of the answered entry's traceparent, when it had a " ..
              "valid one."),
          }, { H.ORIGINAL_ID }, "Written by luastream with each reply."),
          payload = spec.reply_schema and schema_of(spec.reply_schema)
            or generic_payload("What the handler replies (ls.reply)."),
        }, name)
        op.reply = { channel = ref("channels", reply_ch.id), messages = array({ reply_ref }) }
        op["x-luastream-reply-to"] = spec.reply_to
      end
      operations[id_of(name) .. ".receive"] = op

      -- the group's retry stream: copies (ls.retry on new), delayed entries
      -- coming due (ls.retry_after) and replayed dead letters; read with the
      -- stream
      local retry_key = stream_key .. ":retry:" .. spec.group
      local retry_ch = channel(retry_key, P, string.format("The retry stream of group %s of %s: " ..
        "written by luastream only, read by that group only, with the stream.",
        spec.group, spec.stream))
      retry_ch.obj["x-luastream-delay-set"] = stream_key .. ":delayed:" .. spec.group
      local retry_ref = message(retry_ch, {
        title = "A retry copy for group " .. spec.group,
        contentType = "application/json",
        headers = headers_schema(source_headers({
          [H.DELIVERY_COUNT] = header("Deliveries before this copy.", { pattern = "^[0-9]+$" }),
          [H.ORIGINAL_ID] = header("The entry's id on the source stream."),
        }), { H.DELIVERY_COUNT, H.ORIGINAL_ID },
          "The entry's fields, delivery-count and original-id rewritten by luastream."),
        payload = payload,
      }, name)
      local group_ext = { ["x-luastream-handler"] = h.file, ["x-luastream-group"] = spec.group }
      local function with_group(t)
        for k, v in pairs(group_ext) do t[k] = v end
        return t
      end
      operations[id_of(name) .. ".receive-retry"] = with_group({
        action = "receive",
        channel = ref("channels", retry_ch.id),
        title = string.format("%s: group %s reads its retry stream", name, spec.group),
        messages = array({ retry_ref }),
      })
      operations[id_of(name) .. ".retry"] = with_group({
        action = "send",
        channel = ref("channels", retry_ch.id),
        title = string.format("%s: retries and delayed entries of group %s", name, spec.group),
        messages = array({ retry_ref }),
      })

      -- dead letters: a copy of the entry with its provenance
      if spec.dead_letter then
        local dl_key = key_of(spec.dead_letter, P)
        local dl_ch = channel(dl_key, P, string.format("Dead letters on %s.", spec.dead_letter))
        local reasons = array()
        for i, r in ipairs(opts.reasons or {}) do reasons[i] = r end
        table.sort(reasons)
        local dl_ref = message(dl_ch, {
          title = "A dead letter on " .. spec.dead_letter,
          contentType = "application/json",
          headers = headers_schema({
            [H.DL_STREAM] = header("The stream (key) the entry was read from."),
            [H.DL_GROUP] = header("The group that gave up on it."),
            [H.DL_ID] = header("Its id on the source stream."),
            [H.DL_DELIVERIES] = header("How often it was delivered.", { pattern = "^[0-9]+$" }),
            [H.DL_HANDLER] = header("The handler file."),
            [H.DL_REASON] = header("Why.", #reasons > 0 and { enum = reasons } or nil),
            [H.DL_ERROR] = header("The error or the reason given to ls.reject (may be empty)."),
            [H.DL_TIME] = header("When, in ms since the epoch.", { pattern = "^[0-9]+$" }),
            [H.DL_CUT] = header("Only on an entry too large to hold: its size in bytes; " ..
              "its fields are cut.", { pattern = "^[0-9]+$" }),
          }, { H.DL_STREAM, H.DL_GROUP, H.DL_ID, H.DL_DELIVERIES, H.DL_HANDLER, H.DL_REASON,
               H.DL_ERROR, H.DL_TIME },
            "The entry's own fields, and its provenance added by luastream."),
          payload = { description = "The dead-lettered entry's `data` field as it was, JSON " ..
            "or not (bad input is dead-lettered too)." },
        }, name)
        operations[id_of(name) .. ".dead-letter"] = with_group({
          action = "send",
          channel = ref("channels", dl_ch.id),
          title = string.format("%s: dead letters of group %s", name, spec.group),
          messages = array({ dl_ref }),
        })
      end
    end
  end

  for _, c in pairs(chan_by_key) do
    local lines = {}
    for d in pairs(c.descriptions) do lines[#lines + 1] = d end
    table.sort(lines)
    c.obj.description = table.concat(lines, " ")
  end

  local components = { messages = messages }
  local doc = {
    asyncapi = M.ASYNCAPI_VERSION,
    info = {
      title = opts.title,
      version = opts.version,
      description = "The streams, groups, replies, retry and dead-letter streams of the " ..
        "luastream handlers in " .. opts.dir .. ", written by `luastream asyncapi`. An entry's " ..
        "`data` field is the message payload, its other fields the headers.",
    },
    defaultContentType = "application/json",
    channels = channels,
    operations = operations,
    components = components,
  }
  if opts.server then
    local server, schemes = M.server(opts.server)
    doc.servers = map({ redis = server })
    if schemes then components.securitySchemes = schemes end
  end
  if next(scheduled) then doc["x-luastream-scheduled"] = scheduled end
  return doc
end

-- server(s) -> the Server Object and the security schemes it names (or
-- nil). s: {host = "h:6379" (sentinels: "a:26379,b:26379"), tls = bool,
-- db = n, socket = path | nil, service = sentinel service | nil,
-- password = bool, client_cert = bool}. No credentials are in s.
function M.server(s)
  local server = {
    host = s.host,
    protocol = s.tls and "rediss" or "redis",
    description = (s.tls and "Redis over TLS" or "Redis") ..
      (s.service and ", its master found through Redis Sentinel" or "") .. ".",
  }
  if s.db and s.db ~= 0 then server.pathname = "/" .. s.db end
  server["x-luastream-db"] = s.db or 0
  server["x-luastream-tls"] = s.tls and true or false
  if s.socket then server["x-luastream-unix-socket"] = s.socket end
  if s.service then server["x-luastream-sentinel-service"] = s.service end
  local schemes, security
  if s.password then
    schemes, security = map(), array()
    schemes.redisAuth = { type = "userPassword",
      description = "Redis AUTH: a password (and an ACL user) the server asks for; not in this document." }
    security[#security + 1] = ref("components", "securitySchemes", "redisAuth")
  end
  if s.client_cert then
    schemes, security = schemes or map(), security or array()
    schemes.redisClientCert = { type = "X509",
      description = "TLS client certificate (the server's tls-auth-clients)." }
    security[#security + 1] = ref("components", "securitySchemes", "redisClientCert")
  end
  server.security = security
  return server, schemes
end

return M
