-- luastream.handler_spec: what a handler file returns, checked (internal).
--
-- validate() turns what a handler file returned into a checked subscription
-- spec, naming the file, line and field of every problem. It needs no host,
-- so specs can call it directly (also as luastream.handler's validate).
--
-- FIELDS below is the one definition of a handler file's fields and their
-- defaults: the host copies the validated spec into its C struct without
-- defaults of its own (read_spec in host/runtime/runtime.c, which refuses a
-- field it does not know), and docs/handlers.md's table is checked against it
-- (tests/spec/handler_fields_spec.lua).
local ls = require "luastream"

local M = {}

-- Every subscription caps deliveries unless its file says max_deliveries =
-- false: an entry whose handler always retries cannot spin for ever.
M.DEFAULT_MAX_DELIVERIES = 10
M.MAX_WORKERS = 1024
M.MAX_BATCH = 10000
-- A batch handler's default batch_max: min(batch, DEFAULT_BATCH_MAX).
M.DEFAULT_BATCH_MAX = 100
-- Partitions of a partitioned stream: each is a key with its own read
-- connection in the host.
M.MAX_PARTITIONS = 1024
-- memory: the most a handler's Lua state may hold, in bytes. A state with
-- luastream's library loaded holds about 1 MB; the host's size fields go up
-- to 2^40 (--http-max-body).
M.DEFAULT_MEMORY = 256 * 1024 * 1024
M.MIN_MEMORY = 4 * 1024 * 1024
M.MAX_MEMORY = 2 ^ 40

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
-- A number of bytes from min to max.
local function check_bytes(min, max)
  return function(v)
    if type(v) ~= "number" or v ~= math.floor(v) or v < min or v > max then
      return string.format("must be a number of bytes from %d to %d, got %s", min, max,
        type(v) == "number" and string.format("%.17g", v) or type(v))
    end
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
-- breaker = {failures = N, within = "1m", pause = "30s", max_pause = "5m"}:
-- each part optional; without failures there is no rule, and max_pause still
-- caps ls.pause.
M.BREAKER_DEFAULTS = { within = 60000, pause = 30000, max_pause = 300000 }
M.BREAKER_FAILURES_MAX = 1000
local function check_breaker(v)
  if type(v) ~= "table" then return "must be a table such as {failures = 5, within = \"1m\", pause = \"30s\"}" end
  for k, x in pairs(v) do
    if k == "failures" then
      if type(x) ~= "number" or x < 1 or x ~= math.floor(x) or x > M.BREAKER_FAILURES_MAX then
        return string.format("failures must be a whole number from 1 to %d", M.BREAKER_FAILURES_MAX)
      end
    elseif M.BREAKER_DEFAULTS[k] then
      local ms, why = ls.duration(x)
      if not ms then return k .. " " .. why end
      if ms < 1 then return k .. " must be at least 1 ms" end
    else
      return string.format("has an unknown part '%s' (failures, within, pause, max_pause)", tostring(k))
    end
  end
end
-- rate: "200/s", "30/m", "1000/h", optionally "200/s burst 400" (the
-- syntax of ls.rate.take; luastream.rate parses both).
local function check_rate(v)
  if type(v) ~= "string" then
    return "must be text such as \"200/s\", \"30/m\" or \"1000/h\", optionally followed by " ..
      "\"burst N\", got " .. type(v)
  end
  local _, why = require("luastream.rate").parse(v)
  if why then return (why:gsub("^spec ", "", 1)) end
end
-- every: ticks at the multiples of a period since the Unix epoch (UTC).
M.MIN_EVERY = 1000
local function check_every(v)
  local ms, why = ls.duration(v)
  if not ms then return why end
  if ms < M.MIN_EVERY or ms ~= math.floor(ms) then
    return string.format("must be a whole number of ms of at least %d (\"1s\")", M.MIN_EVERY)
  end
end
-- cron, tz and schemas are read by the host's own parsers (host/base/cron.c,
-- tz.c, host/runtime/schema.c): luastream.core inside a host, the harness
-- module in a busted spec.
local host_checks = {}
local function host_check(name)
  if host_checks[name] then return host_checks[name] end
  local ok, core = pcall(require, "luastream.core")
  local why = ok and "" or tostring(core)
  if not (ok and core[name]) then ok, core = pcall(require, "luastream_testing") end
  if not (ok and type(core) == "table" and core[name]) then
    error("luastream.handler: " .. name .. " needs the luastream host or its test harness module " ..
      "(luastream_testing.so): " .. why, 0)
  end
  host_checks[name] = core[name]
  return core[name]
end
local function check_cron(v)
  if type(v) ~= "string" then return "must be text such as \"*/5 * * * *\", got " .. type(v) end
  local why = host_check("cron_check")(v)
  if why then return "\"" .. v .. "\": " .. why end
end
local function check_tz(v)
  if type(v) ~= "string" then return "must be the name of a time zone such as \"Europe/Berlin\", got " .. type(v) end
  return host_check("tz_check")(v)
end
-- name: the schedule's key is "luastream:tick:{NAME}", so NAME must keep
-- the braces its hash tag.
local function check_schedule_name(v)
  if type(v) ~= "string" or v == "" then return "must be a non-empty string" end
  if v:find("[{}%c]") then return "must not hold '{', '}' or control characters (it is the key's hash tag)" end
end
-- schema, reply_schema: a JSON Schema subset as a Lua table, checked by the
-- host's compiler. Returns why, and the keyword or
-- property nearest the problem (its line is the one reported).
local function check_schema(v)
  if type(v) ~= "table" then
    return "must be a table in JSON Schema form, such as {type = \"object\", required = {\"id\"}}, got " .. type(v)
  end
  local at, near, why = host_check("schema_check")(v)
  if at then return "at " .. at .. ": " .. why, { at = at, near = near } end
end
local function check_read(v)
  if v ~= "new" and v ~= "claiming" and v ~= "reclaim" then
    return "must be \"new\", \"claiming\" or \"reclaim\""
  end
end

-- The fields a handler file may set, in the order problems are reported:
-- { name, check, required = true | default = value }. A field without either
-- is optional and absent (nil) when not set.
-- required: required of a handler that reads a stream. schedule = true: a
-- field of scheduled handlers (every/cron) only; both = true: of both kinds;
-- any other field reads a stream and is refused in a scheduled file.
local FIELDS = {
  { "stream", check_string, required = true },
  { "group", check_string, required = true },
  { "handle", check_function },
  { "handle_batch", check_function },
  { "tick", check_function, schedule = true },
  { "every", check_every, schedule = true },
  { "cron", check_cron, schedule = true },
  { "tz", check_tz, schedule = true },
  { "catch_up", check_boolean, schedule = true, default = false },
  { "name", check_schedule_name, schedule = true },
  { "read", check_read, default = "new" },
  { "min_idle", check_duration },
  { "max_run", check_duration },
  { "start", check_start, default = "new" },
  { "start_at", check_start },
  { "consumer", check_string },
  { "batch", check_count_upto(M.MAX_BATCH), default = 100 },
  { "batch_max", check_count_upto(M.MAX_BATCH) },
  { "batch_wait", check_duration, default = 0 },
  { "workers", check_count_upto(M.MAX_WORKERS), default = 1 },
  { "max_in_flight", check_count },
  { "max_in_flight_per_key", check_count },
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
  { "memory", check_bytes(M.MIN_MEMORY, M.MAX_MEMORY), default = M.DEFAULT_MEMORY, both = true },
  { "rate", check_rate },
  { "rate_per_key", check_rate },
  { "breaker", check_breaker },
  { "schema", check_schema },
  { "reply_schema", check_schema },
}
M.FIELDS = FIELDS
local KNOWN = {}
for _, f in ipairs(FIELDS) do KNOWN[f[1]] = true end
-- What a handler file runs: exactly one of these functions. tick makes it a
-- scheduled handler (with every or cron); the others read a stream. Another
-- kind of handler adds its name here.
M.RUNS = { "handle", "handle_batch", "tick" }
-- The fields that make a file a scheduled handler.
M.SCHEDULE_MARKS = { "tick", "every", "cron" }

-- The fields a scheduled file may set, for messages.
function M.schedule_fields()
  local names = {}
  for _, f in ipairs(FIELDS) do
    if f.schedule or f.both then names[#names + 1] = f[1] end
  end
  return table.concat(names, ", ")
end

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

-- The line of `near =` (a schema's keyword or property) at or after line
-- `from`; with anywhere, else anywhere in the file; else nil.
local function line_near(source, from, near, anywhere)
  local escaped = near:gsub("%p", "%%%0")
  local bare = "%f[%w_$]" .. escaped .. "%s*="
  local quoted = "%[%s*[\"']" .. escaped .. "[\"']%s*%]%s*="
  local n, first = 0, nil
  for line in (source .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    if line:find(bare) or line:find(quoted) then
      if n >= from then return n end
      first = first or n
    end
  end
  return anywhere and first or nil
end

-- The line of a problem in a schema whose field is on line `from`: the names
-- of its path ("$.properties.tags.items": properties, then tags, then items)
-- one after the other, then the keyword or property nearest to it.
local function line_in_schema(source, from, at, near)
  local line, i = from, 2 -- after "$"
  while i <= #at do
    local name, next_i = at:match("^%.([^.%[]+)()", i)
    if not name then name, next_i = at:match('^%["(.-)"%]()', i) end
    if not name then break end
    line = line_near(source, line, name) or line
    i = next_i
  end
  if near ~= "" then line = line_near(source, line, near, true) or line end
  return line
end

-- validate(value, path, source) -> spec, or raises "path:line: message"
-- lines. source is the file's text as the host loaded it (for the lines of
-- problems; the file is not read again).
function M.validate(value, path, source)
  source = source or ""
  local problems = {}
  local function problem(field, msg, near)
    local line = line_of(source, field)
    if near then line = line_in_schema(source, line, near.at, near.near) end
    problems[#problems + 1] = string.format("%s:%d: %s", path, line, msg)
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
  local scheduled = false
  for _, name in ipairs(M.SCHEDULE_MARKS) do scheduled = scheduled or value[name] ~= nil end
  local runs = {}
  for _, name in ipairs(M.RUNS) do
    if value[name] ~= nil then runs[#runs + 1] = name end
  end
  if #runs == 0 then
    -- A scheduled file without tick is told below; a stream handler needs handle.
    if not scheduled then
      problem(nil, string.format("missing required field 'handle' (a handler file sets exactly one of '%s')",
        table.concat(M.RUNS, "', '")))
    end
  elseif #runs > 1 then
    problem(runs[2], string.format("fields '%s' set together: a handler file sets exactly one of '%s'",
      table.concat(runs, "' and '"), table.concat(M.RUNS, "', '")))
  end
  if scheduled then
    for _, f in ipairs(FIELDS) do
      local name = f[1]
      if value[name] ~= nil and not f.schedule and not f.both then
        problem(name, string.format("field '%s' does not apply to a scheduled handler (every or cron): " ..
          "it reads no stream; a scheduled file has %s", name, M.schedule_fields()))
      end
    end
    if value.tick == nil then
      problem(nil, "missing required field 'tick': a scheduled handler (every or cron) runs tick(ctx)")
    end
    if value.every ~= nil and value.cron ~= nil then
      problem("cron", "fields 'every' and 'cron': give exactly one (when the ticks are)")
    elseif value.every == nil and value.cron == nil then
      problem(nil, "missing required field: 'every' or 'cron' (when the ticks are), with 'tick'")
    end
    if value.tz ~= nil and value.every ~= nil then
      problem("tz", "field 'tz' applies to cron only: every ticks at multiples of its period since " ..
        "the Unix epoch, in UTC")
    end
  else
    for _, f in ipairs(FIELDS) do
      if f.schedule and value[f[1]] ~= nil then
        problem(f[1], string.format("field '%s' applies to scheduled handlers only (every or cron with tick)", f[1]))
      end
    end
  end
  local spec = {}
  for _, f in ipairs(FIELDS) do
    local name, check = f[1], f[2]
    local v = value[name]
    if v == nil then
      if f.required and not scheduled then problem(nil, string.format("missing required field '%s'", name)) end
      v = f.default
    else
      local why, near = check(v)
      if why then problem(name, string.format("field '%s' %s", name, why), near) end
    end
    spec[name] = v
  end
  if value.handle_batch == nil then
    for _, name in ipairs({ "batch_max", "batch_wait" }) do
      if value[name] ~= nil then
        problem(name, string.format("field '%s' only applies to handle_batch", name))
      end
    end
  elseif type(spec.batch) == "number" and type(spec.batch_max) == "number" and spec.batch_max > spec.batch then
    problem("batch_max", string.format("field 'batch_max' must be at most batch (%d), got %d: " ..
      "a call takes its entries from one read", spec.batch, spec.batch_max))
  end
  if spec.min_idle ~= nil and check_duration(spec.min_idle) == nil and ls.duration(spec.min_idle) < 1 then
    problem("min_idle", "field 'min_idle' must be at least 1 ms: with 0 every read claims back " ..
      "what is still running")
  end
  if spec.max_run ~= nil and check_duration(spec.max_run) == nil and ls.duration(spec.max_run) < 1 then
    problem("max_run", "field 'max_run' must be at least 1 ms")
  end
  if value.max_run ~= nil and value.min_idle == nil then
    problem("max_run", "field 'max_run' needs min_idle: it ends the host's keeping of a running " ..
      "entry claimed, which only a subscription with min_idle does (on read = \"new\", give it " ..
      "the min_idle of the group's reclaim reader)")
  end
  if (spec.read == "claiming" or spec.read == "reclaim") and value.min_idle == nil then
    problem("read", string.format("read = \"%s\" needs min_idle: how long an entry stays pending before " ..
      "it counts as abandoned (ms, or a string such as \"30s\"); it has no default", spec.read))
  end
  if spec.reply_to ~= nil and spec.reply_to == spec.stream then
    problem("reply_to", "field 'reply_to' must name another stream than 'stream': " ..
      "the group would read its own replies")
  end
  if spec.reply_schema ~= nil and spec.reply_to == nil then
    problem("reply_schema", "field 'reply_schema' describes the replies to reply_to, and there is no reply_to")
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
  spec.every = spec.every and ls.duration(spec.every) or nil
  if scheduled and spec.name == nil then
    -- The handler's name (host/base/handler_name.c): the file name without .lua.
    local base = tostring(path):match("[^/]*$")
    if #base > 4 and base:sub(-4) == ".lua" then base = base:sub(1, -5) end
    if check_schedule_name(base) then
      error(string.format("%s:%d: the file name %s is not a schedule name: %s; give the field 'name'",
        path, line_of(source, nil), base, check_schedule_name(base)), 0)
    end
    spec.name = base
  end
  spec.min_idle = spec.min_idle and ls.duration(spec.min_idle) or nil
  spec.max_run = spec.max_run and ls.duration(spec.max_run) or nil
  -- A batch handler always has batch_max (the host's sign of one); a handle
  -- has none, and waits for nothing.
  if spec.handle_batch then
    spec.batch_max = spec.batch_max or math.min(spec.batch, M.DEFAULT_BATCH_MAX)
    spec.batch_wait = ls.duration(spec.batch_wait)
  else
    spec.batch_wait = nil
  end
  if spec.max_deliveries == false then spec.max_deliveries = nil end -- no cap
  -- what the host's limiters need (host/consumer/permits.c, key_rate.c)
  for _, name in ipairs({ "rate", "rate_per_key" }) do
    if spec[name] ~= nil then
      local l = require("luastream.rate").parse(spec[name])
      spec[name] = { interval = l.interval, burst = l.burst }
    end
  end
  -- The host reads the breaker as four numbers (ms; failures nil: no rule).
  local breaker = spec.breaker or {}
  spec.breaker = nil
  spec.breaker_failures = breaker.failures
  for k, default in pairs(M.BREAKER_DEFAULTS) do
    spec["breaker_" .. k] = breaker[k] and ls.duration(breaker[k]) or default
  end
  return spec
end

return M
