-- luastream.outcome: what a handle returned, turned into the outcome the
-- host applies (internal): codes of the host's (core.outcomes,
-- core.reasons; read by host/runtime/jobs.c), never text, and for a reply
-- its XADD. Runs only inside a host.
local ls = require "luastream"
local ctxlib = require "luastream.ctx"
local table_new = require "table.new"

-- luastream.core exists only inside a host.
local has_core, core = pcall(require, "luastream.core")
if not has_core then core = nil end
local H = core and core.headers or {}
local R = core and core.reasons or {}
local O = core and core.outcomes or {}
local KEY_HEADER = H.PARTITION_KEY
local entry_fields, add_trace, pending_writes = ctxlib.entry_fields, ctxlib.add_trace, ctxlib.writes

local M = {}

local function describe(v)
  if type(v) == "table" then
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = tostring(k) end
    table.sort(keys)
    return "a table with keys {" .. table.concat(keys, ", ") .. "}"
  end
  return type(v) .. " " .. tostring(v)
end

-- The keys that each name an outcome: a table may hold one of them.
local OUTCOME_KEYS = { "ack", "retry", "reply", "retry_after", "reject", "pause" }

-- The outcomes a table names, in OUTCOME_KEYS' order (for the error only).
local function named_outcomes(result)
  local named = {}
  for _, k in ipairs(OUTCOME_KEYS) do
    if result[k] ~= nil then named[#named + 1] = k end
  end
  if result.outcome == "retry_after" and result.retry_after == nil then named[#named + 1] = "retry_after" end
  return named
end

-- of(result, ctx, spec, seq, reply_to) -> what the host applies, as codes (O:
-- core.outcomes, R: core.reasons; read by host/runtime/jobs.c):
--   O.ACK [writes] | O.REPLY writes | O.RETRY | O.RETRY_AFTER ms | O.REJECT reason
--   | O.PAUSE ms reason | O.ERROR R.<reason> message
-- writes: { {cmd, arg, ...}, ... }: the handler's ctx:write commands and
-- ctx:publish XADDs, and for O.REPLY the reply's XADD last; written together
-- with the ack. ctx is nil for a handle that takes no ctx (see dispatcher).
function M.of(result, ctx, spec, seq, reply_to)
  local writes = ctx and pending_writes(ctx)
  if result == nil then return O.ACK, writes end
  if type(result) ~= "table" then
    return O.ERROR, R.BAD_RETURN, "handle returned " .. describe(result) ..
      "; expected ls.ack(), ls.retry(), ls.reply(...) or nothing"
  end
  -- Counted without a loop: a loop here is an inner loop on every entry's
  -- path, and LuaJIT then compiles none of the dispatcher (its trace aborts,
  -- "inner loop in root trace"): twice the instructions per message.
  local n = (result.ack ~= nil and 1 or 0) + (result.retry ~= nil and 1 or 0) +
    (result.reply ~= nil and 1 or 0) + (result.reject ~= nil and 1 or 0) +
    (result.pause ~= nil and 1 or 0) +
    ((result.retry_after ~= nil or result.outcome == "retry_after") and 1 or 0)
  if n > 1 then
    local named = named_outcomes(result)
    return O.ERROR, R.BAD_RETURN, "handle returned " .. describe(result) .. ", which names " ..
      #named .. " outcomes (" .. table.concat(named, ", ") .. "); return one: ls.ack(), " ..
      "ls.retry(), ls.retry_after(...), ls.reply(...) or ls.reject(...)"
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
    local data_at = #fields + 2 -- entry_fields adds "data", then the JSON body
    fields, why = entry_fields(result.reply, opts, fields)
    if not fields then return O.ERROR, R.BAD_RETURN, "ls.reply: " .. why end
    if spec.reply_schema then
      local mismatch = core.schema_mismatch("reply_schema", fields[data_at])
      if mismatch then
        return O.ERROR, R.BAD_RETURN, "ls.reply: the reply does not match reply_schema: " .. mismatch
      end
    end
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
  if result.pause ~= nil or result.outcome == "pause" then
    local ms, why = ls.duration(result.pause)
    if not ms then return O.ERROR, R.BAD_RETURN, "ls.pause: delay " .. why end
    return O.PAUSE, math.floor(ms), tostring(result.reason)
  end
  return O.ERROR, R.BAD_RETURN, "handle returned " .. describe(result) ..
    "; expected ls.ack(), ls.retry(), ls.reply(...) or nothing"
end

return M
