-- luastream.batch: the host's Lua half of a handle_batch file (internal;
-- docs/handlers.md, "Batch handlers"), loaded only for those. dispatcher()
-- builds the function a call's coroutine runs: each entry's message and ctx
-- as luastream/handler.lua builds them for handle, the call's own ctx
-- (ctx:pg_once_batch, luastream/pg.lua), the user's handle_batch, and what
-- it returned turned into one outcome per entry (luastream/outcome.lua).
-- Runs only inside a host.
local core = require "luastream.core"
local ctxlib = require "luastream.ctx"
local messages = require "luastream.message"
local outcome_of = require("luastream.outcome").of
local R, O, SEQ = core.reasons, core.outcomes, ctxlib.SEQ

local M = {}

-- ctx:pg_once_batch(entries, fn) -> true, what fn returned | false (every
-- entry done before) | nil, err, sqlstate: fn(tx, fresh) in one PostgreSQL
-- transaction that first records every entry of entries (a handle_batch
-- call's list, or part of it) as ctx:pg_once does; fresh lists those not
-- recorded before, in their order (luastream/pg.lua).
local function pg_once_batch(self, entries, fn)
  if type(self) ~= "table" or getmetatable(self) == nil or rawget(self, "size") == nil then
    error("ctx:pg_once_batch: call it with a colon on handle_batch's ctx " ..
      "(ctx:pg_once_batch(entries, function(tx, fresh) ... end))", 2)
  end
  if type(entries) ~= "table" then error("ctx:pg_once_batch: entries must be a list, got " .. type(entries), 2) end
  local ids = {}
  for i, e in ipairs(entries) do
    local seq = type(e) == "table" and type(e.ctx) == "table" and rawget(e.ctx, SEQ)
    if not seq then
      error("ctx:pg_once_batch: entry " .. i .. " is not one of handle_batch's entries", 2)
    end
    ids[i] = core.source_id(seq)
  end
  return require("luastream.pg").once_batch(self.stream, self.group, entries, ids, fn)
end

-- call_metatable(spec, consumer [, partition]) -> the metatable of the ctx
-- handle_batch gets beside its entries: what the call's entries share
-- (stream, group, consumer, partition) and ctx:pg_once_batch; each entry's
-- own ctx is entries[i].ctx.
local function call_metatable(spec, consumer, partition)
  local members = { stream = spec.stream, group = spec.group, consumer = consumer, partition_tag = "",
                    pg_once_batch = pg_once_batch }
  if partition ~= nil then
    members.stream = ctxlib.partition_key(spec.stream, partition)
    members.partition, members.partition_tag = partition, "{" .. partition .. "}"
  end
  return { __index = members }
end

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

-- dispatcher(spec, consumer) -> function(seq, partition, n) run in a
-- call's coroutine: entries seq .. seq + n - 1. Each entry's message and
-- ctx are built as for handle; one whose body does not decode, or that its
-- schema refuses, never reaches handle_batch (its outcome is bad input, as
-- for handle). Returns the list of each entry's outcome as {code, ...}
-- (host/runtime/jobs.c's finish_batch).
function M.dispatcher(spec, consumer)
  local handle_batch = spec.handle_batch
  local views = {}
  local NONE = -1
  local function view(partition)
    local p = partition ~= NONE and partition or nil
    local Ctx, reply_to = ctxlib.metatable(spec, consumer, p)
    local v = { Ctx = Ctx, reply_to = reply_to, call = call_metatable(spec, consumer, p) }
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
      local ctx
      if not reason then
        ctx = setmetatable({ [SEQ] = s }, v.Ctx)
        if msg == nil then msg, reason, text = messages.of_fields(ctx, spec) end
      end
      if reason then
        results[k] = { O.INVALID, reason, text }
      else
        entries[#entries + 1] = { msg = msg, ctx = ctx }
        at[#entries] = k
      end
    end
    if #entries == 0 then return results end
    local call = setmetatable({ size = #entries }, v.call)
    -- The call gets a list of its own: one it sorts or shortens must not
    -- move an outcome, or an entry's writes, to another entry's ack.
    local handed = {}
    for i = 1, #entries do handed[i] = entries[i] end
    local ok, out, exceptions = xpcall(handle_batch, traced, handed, call)
    local each, why
    if ok then
      each, why = outcomes_of(#entries, out, exceptions)
    end
    if each then
      -- A malformed outcome (a reply reply_schema refuses, ls.reply without
      -- reply_to) fails its own entry only, with its detail, as for handle.
      for i, e in ipairs(entries) do
        local k = at[i]
        results[k] = { outcome_of(each[i], e.ctx, spec, seq + k - 1, v.reply_to) }
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
