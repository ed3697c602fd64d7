-- luastream.handler: the host's Lua half of one handler file (internal).
--
-- validate() (luastream/handler_spec.lua) turns what a handler file
-- returned into a checked subscription spec. dispatcher() builds the
-- function each entry's coroutine runs: the message the host decoded
-- (luastream/message.lua), ctx around it (luastream/ctx.lua), the user's
-- handle, and its return value turned into an outcome the C side applies
-- (luastream/outcome.lua). Everything here is policy; the mechanism (reads,
-- decoding, lanes, acks) is C. validate() needs no host, so specs can call
-- it directly; dispatcher() runs only inside one.
local handler_spec = require "luastream.handler_spec"

-- luastream.core exists only inside a host.
local has_core, core = pcall(require, "luastream.core")
if not has_core then core = nil end
local R = core and core.reasons or {}
local O = core and core.outcomes or {}

local M = {
  validate = handler_spec.validate,
  FIELDS = handler_spec.FIELDS,
  DEFAULT_MAX_DELIVERIES = handler_spec.DEFAULT_MAX_DELIVERIES,
  MAX_WORKERS = handler_spec.MAX_WORKERS,
  MAX_BATCH = handler_spec.MAX_BATCH,
  MAX_PARTITIONS = handler_spec.MAX_PARTITIONS,
}

-- What runs an entry: only inside a host (they need luastream.core).
local ctxlib, messages, outcome_of, SEQ
if core then
  ctxlib = require "luastream.ctx"
  messages = require "luastream.message"
  outcome_of = require("luastream.outcome").of
  SEQ = ctxlib.SEQ
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
local batch_dispatcher

function M.dispatcher(spec, consumer)
  if not core then error("luastream.handler: dispatcher() runs only inside a luastream host", 2) end
  if spec.handle_batch then return batch_dispatcher(spec, consumer) end
  local handle = spec.handle
  local params = debug.getinfo(handle, "u")
  local wants_ctx = params.isvararg or params.nparams >= 2
  -- What ctx offers in one partition (NONE: an unpartitioned handler), and
  -- where its replies go; made on first use.
  local NONE = -1
  local views = {}
  local function view(partition)
    local Ctx, reply_to = ctxlib.metatable(spec, consumer, partition ~= NONE and partition or nil)
    local v = { Ctx = Ctx, reply_to = reply_to }
    views[partition] = v
    return v
  end
  local message = messages.reader()
  return function(seq, partition)
    partition = partition or NONE
    local v = views[partition] or view(partition)
    local msg, reason, text = message(seq)
    if reason then return O.INVALID, reason, text end
    if msg ~= nil and not wants_ctx then return outcome_of(handle(msg), nil, spec, seq, v.reply_to) end
    local ctx = setmetatable({ [SEQ] = seq }, v.Ctx)
    if msg == nil then
      msg = messages.from_fields(ctx)
      if msg == nil then
        return O.INVALID, R.INPUT_NO_FIELDS, "entry has no data field and no other field to deliver"
      end
    end
    return outcome_of(handle(msg, ctx), ctx, spec, seq, v.reply_to)
  end
end

-- ---- handle_batch ----

-- What a raise in handle_batch leaves for every entry of the call: the
-- message and the traceback, as the host gives a handle's raise.
local function traced(err)
  if type(err) ~= "string" then err = string.format("(error object is a %s value)", type(err)) end
  return debug.traceback(err, 2)
end

-- Whether v is a list of outcomes rather than one outcome: outcomes are
-- tables with named keys (ls.ack(), {retry = true}), a list has [1].
local function is_list(v)
  return type(v) == "table" and rawget(v, 1) ~= nil
end

-- The outcome of each entry of a call, from what handle_batch returned:
--   nothing                       every entry acks (with its own writes)
--   outcome [, exceptions]        every entry that outcome, but those of
--                                 exceptions, {[i] = outcome}: entry i's
--   {outcome_1, ..., outcome_n}   one per entry, in the entries' order
-- Returns the list of outcomes (nil meaning ack), or nil and why the return
-- is malformed.
local function outcomes_of(n, out, exceptions)
  local each = {}
  if is_list(out) then
    if exceptions ~= nil then return nil, "a list of outcomes and a second value" end
    local count = 0
    for k in pairs(out) do
      if type(k) ~= "number" or k < 1 or k > n or k % 1 ~= 0 then
        return nil, string.format("a list of outcomes with a key %s (entries 1 to %d)", tostring(k), n)
      end
      count = count + 1
    end
    if count ~= n then
      return nil, string.format("a list of %d outcomes for %d entries (one per entry, in order)", count, n)
    end
    return out
  end
  if exceptions ~= nil then
    if type(exceptions) ~= "table" then
      return nil, "exceptions that are a " .. type(exceptions) .. " (expected {[i] = outcome})"
    end
    for k in pairs(exceptions) do
      if type(k) ~= "number" or k < 1 or k > n or k % 1 ~= 0 then
        return nil, string.format("an exception for %s (entries 1 to %d)", tostring(k), n)
      end
    end
  end
  for i = 1, n do
    local o = exceptions and exceptions[i]
    if o == nil then o = out end
    each[i] = o
  end
  return each
end

-- batch_dispatcher(spec, consumer) -> function(seq, partition, n) run in a
-- call's coroutine: entries seq .. seq + n - 1. Each entry's message and
-- ctx are built as for handle; one whose body does not decode never reaches
-- handle_batch (its outcome is bad input, as for handle). Returns the list
-- of each entry's outcome as {code, ...} (host/runtime/jobs.c's
-- finish_batch).
function batch_dispatcher(spec, consumer)
  local handle_batch = spec.handle_batch
  local views = {}
  local NONE = -1
  local function view(partition)
    local p = partition ~= NONE and partition or nil
    local Ctx, reply_to = ctxlib.metatable(spec, consumer, p)
    local v = { Ctx = Ctx, reply_to = reply_to, call = ctxlib.call_metatable(spec, consumer, p) }
    views[partition] = v
    return v
  end
  local message = messages.reader()
  return function(seq, partition, n)
    partition = partition or NONE
    local v = views[partition] or view(partition)
    local results, entries, at = {}, {}, {}
    for k = 1, n do
      local s = seq + k - 1
      local msg, reason, text = message(s)
      if reason then
        results[k] = { O.INVALID, reason, text }
      else
        local ctx = setmetatable({ [SEQ] = s }, v.Ctx)
        if msg == nil then msg = messages.from_fields(ctx) end
        if msg == nil then
          results[k] = { O.INVALID, R.INPUT_NO_FIELDS, "entry has no data field and no other field to deliver" }
        else
          entries[#entries + 1] = { msg = msg, ctx = ctx }
          at[#entries] = k
        end
      end
    end
    if #entries == 0 then return results end
    local call = setmetatable({ size = #entries }, v.call)
    local ok, out, exceptions = xpcall(handle_batch, traced, entries, call)
    local each, why
    if ok then
      each, why = outcomes_of(#entries, out, exceptions)
    end
    if each then
      for i, e in ipairs(entries) do
        local k = at[i]
        local r = { outcome_of(each[i], e.ctx, spec, seq + k - 1, v.reply_to) }
        if r[1] == O.ERROR then -- a malformed outcome: the return as a whole is
          why = "entry " .. i .. ": " .. tostring(r[3])
          break
        end
        results[k] = r
      end
    end
    if not ok or why then
      local failed = ok and { O.ERROR, R.BAD_RETURN, "handle_batch returned " .. why }
        or { O.ERROR, R.HANDLER_ERROR, out }
      for i = 1, #entries do results[at[i]] = failed end
    end
    return results
  end
end

return M
