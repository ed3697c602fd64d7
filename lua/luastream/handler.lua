-- luastream.handler: the host's Lua half of one handler file (internal).
--
-- validate() (luastream/handler_spec.lua) turns what a handler file
-- returned into a checked subscription spec. dispatcher() builds the
-- function each entry's coroutine runs: the message the host decoded
-- (luastream/message.lua), ctx around it (luastream/ctx.lua), the user's
-- handle, and its return value turned into an outcome the C side applies
-- (luastream/outcome.lua); for a handle_batch file, luastream/batch.lua's
-- runs a call's entries; for a scheduled file, each job is a tick.
-- Everything here is policy; the mechanism (reads,
-- decoding, lanes, acks) is C. validate() needs no host, so specs can call
-- it directly; dispatcher() runs only inside one.
local handler_spec = require "luastream.handler_spec"

-- luastream.core exists only inside a host.
local has_core, core = pcall(require, "luastream.core")
if not has_core then core = nil end
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

-- A scheduled handler's dispatcher: each job is one tick, its entry's id
-- "<tick>-0" (the tick's scheduled time, Unix ms). What tick returns is not
-- looked at; its writes go with the tick's done mark (host/consumer/schedule.c).
local function tick_dispatcher(spec, consumer)
  local tick = spec.tick
  local Ctx = ctxlib.tick_metatable(spec, consumer)
  return function(seq)
    local ms = tonumber(core.entry(seq):match("^(%d+)"))
    local ctx = setmetatable({ [SEQ] = seq, tick = ms, id = ms }, Ctx)
    tick(ctx)
    return O.ACK, ctxlib.writes(ctx)
  end
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
  if spec.tick then return tick_dispatcher(spec, consumer) end
  -- a handle_batch file's (luastream/batch.lua: loaded only for those)
  if spec.handle_batch then return require("luastream.batch").dispatcher(spec, consumer) end
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
      msg, reason, text = messages.of_fields(ctx, spec)
      if reason then return O.INVALID, reason, text end
    end
    return outcome_of(handle(msg, ctx), ctx, spec, seq, v.reply_to)
  end
end

return M
