-- luastream.ctx: the ctx a handler gets with each entry (internal): its
-- members (stream, group, consumer, partition, ...), what it builds on first
-- use from the entry the host holds (id, deliveries, headers, fields,
-- idempotency_key), and the writes it queues for the ack (ctx:write,
-- ctx:publish; ctx:pg_once runs through luastream/pg.lua). Runs only inside
-- a host.
local json = require "luastream.json"
local handler_spec = require "luastream.handler_spec"

-- luastream.core exists only inside a host.
local has_core, core = pcall(require, "luastream.core")
if not has_core then core = nil end
local H = core and core.headers or {}
local encode = json.encode
local DATA, KEY_HEADER = H.DATA, H.PARTITION_KEY
local DELIVERY_COUNT_HEADER, IDLE_MS_HEADER = H.DELIVERY_COUNT, H.IDLE_MS

local M = {}

-- Private ctx key: the job's sequence number (what core.entry asks the host for).
local SEQ = {}
M.SEQ = SEQ
-- Private ctx member: the key whose Redis Cluster slot what is written with
-- the outcome must share, when not ctx.stream (a tick's: its tick key).
local SLOT = {}
-- Private ctx member: SLOT's hash tag ("{NAME}"), for the message when a key is not in it.
local TAG = {}

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
    if type(n) ~= "number" or n < 1 or n > handler_spec.MAX_PARTITIONS or n % 1 ~= 0 then
      error("ctx:publish: partitions must be an integer from 1 to " .. handler_spec.MAX_PARTITIONS, 2)
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
  local other_slot = core.slot_check("ctx:publish", fields, self[SLOT] or self.stream, self[TAG])
  if other_slot then error(other_slot, 2) end
  return queue(self, fields)
end

-- ctx:write(cmd, ...) -> true. A Redis command written with the ack, under
-- the same rule as ctx:publish: so exactly once per entry and group.
-- Arguments as for ls.redis.call; checked now, so that a mistake raises in
-- the handler rather than failing with the ack.
local function write(self, ...)
  local command = core.command("ctx:write", ...)
  local other_slot = core.slot_check("ctx:write", command, self[SLOT] or self.stream, self[TAG])
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

-- metatable(spec, consumer [, partition]) -> the metatable of the ctx of
-- an entry of that partition (nil: an unpartitioned handler), and the
-- stream its replies go to (nil: no reply_to).
function M.metatable(spec, consumer, partition)
  local members = { stream = spec.stream, group = spec.group, consumer = consumer, publish = publish,
                    write = write, pg_once = pg_once, partition_tag = "" }
  local reply_to = spec.reply_to
  if partition ~= nil then
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
  return Ctx, reply_to
end

-- The key a schedule keeps its ticks in, as the host names it
-- (SCHED_KEY_PREFIX, host/consumer/schedule.h): "luastream:tick:{NAME}".
local function tick_key(name) return "luastream:tick:{" .. name .. "}" end

-- tick_metatable(spec, consumer) -> the metatable of a tick's ctx: name,
-- consumer, write, publish and pg_once (keyed on the schedule's name and
-- the tick: once per tick); ctx.tick and ctx.id (the tick's scheduled time,
-- Unix ms) are set on each ctx.
function M.tick_metatable(spec, consumer)
  local name = spec.name
  local members = { name = name, consumer = consumer, publish = publish, write = write,
                    [SLOT] = tick_key(name), [TAG] = "{" .. name .. "}" }
  members.pg_once = function(self, fn)
    if type(self) ~= "table" or rawget(self, SEQ) == nil then
      error("ctx:pg_once: call it with a colon (ctx:pg_once(function(tx) ... end))", 2)
    end
    return require("luastream.pg").once("luastream:tick", name, string.format("%.0f", rawget(self, "tick")), fn)
  end
  return { __index = members }
end

-- For the outcome (luastream/outcome.lua): building a reply's XADD, and the
-- writes ctx queued (nil: none).
M.entry_fields = entry_fields
M.add_trace = add_trace
function M.writes(ctx) return pending_writes[ctx] end

return M
