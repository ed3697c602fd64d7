-- luastream: what a handler file requires.
--
--   local ls = require "luastream"
--   return { stream = "payments", group = "ledger", handle = function(msg, ctx) return ls.ack() end }
--
-- Outcomes are plain tables ({ack = true}, {retry = true}, {reply = body}), so a
-- handler may build them by hand; the functions here only name them. The host's
-- primitives (log sink, sleep, publish) come from the C module luastream.core,
-- which exists only inside a running host; elsewhere (a busted spec that uses
-- the header names) those functions raise.
local has_core, core = pcall(require, "luastream.core")
if not has_core then
  local function outside() error("only available inside a running luastream host", 3) end
  core = { version = "outside a host", log = outside, sleep = outside, publish = outside }
end

local ls = {}

ls.VERSION = core.version

-- Header names (entry fields other than `data`) that luastream reads or writes.
ls.PARTITION_KEY_HEADER = "partition-key"
ls.DELIVERY_COUNT_HEADER = "delivery-count"
ls.IDLE_MS_HEADER = "idle-ms"
ls.ORIGINAL_ID_HEADER = "original-id"
ls.RETRY_GROUP_HEADER = "retry-group"
ls.CONTENT_TYPE_HEADER = "content-type"

---------------------------------------------------------------- outcomes

local ACK, RETRY = { ack = true }, { retry = true }

function ls.ack() return ACK end
function ls.retry() return RETRY end

-- reply(body [, {key = K, headers = {name = value}}]): publish body (JSON) to the
-- handler's reply_to stream, then acknowledge.
function ls.reply(body, opts)
  if body == nil then error("ls.reply: the reply body is nil", 2) end
  return { reply = body, opts = opts }
end

function ls.retry_after(delay)
  error("ls.retry_after is not yet supported by this version of luastream", 2)
end

function ls.reject(reason)
  error("ls.reject is not yet supported by this version of luastream", 2)
end

---------------------------------------------------------------- durations

local UNIT_MS = { ms = 1, s = 1000, m = 60000, h = 3600000 }

-- duration(v): milliseconds from a number of ms or a string such as "250ms",
-- "30s", "5m", "1h". Returns nil and a reason when v is neither.
function ls.duration(v)
  if type(v) == "number" then
    if v >= 0 and v == v and v ~= math.huge then return v end
    return nil, "must be a non-negative number of milliseconds"
  end
  if type(v) == "string" then
    local n, unit = v:match("^%s*(%d+%.?%d*)%s*(%a*)%s*$")
    local scale = UNIT_MS[unit == "" and "ms" or unit]
    if n and scale then return tonumber(n) * scale end
    return nil, "must be milliseconds or a string like \"250ms\", \"30s\", \"5m\", \"1h\""
  end
  return nil, "must be a number of milliseconds or a duration string, got " .. type(v)
end

-- sleep(ms | "2s"): waits on the host's clock. Only the calling handler waits:
-- the other lanes keep running.
function ls.sleep(delay)
  local ms, why = ls.duration(delay)
  if not ms then error("ls.sleep: delay " .. why, 2) end
  return core.sleep(ms)
end

---------------------------------------------------------------- logging

local function is_id_key(k)
  return k == "id" or k:sub(-3) == "_id"
end

-- Ids lead (easy to grep), then the other keys alphabetically: stable lines.
local function key_order(a, b)
  local ia, ib = is_id_key(a), is_id_key(b)
  if ia ~= ib then return ia end
  return a < b
end

local json_encode = require("luastream.json").encode

local function log_value(v)
  local t = type(v)
  if t == "number" and v == math.floor(v) and math.abs(v) < 2^53 then
    return string.format("%d", v)
  elseif t == "table" then
    return json_encode(v) or tostring(v)
  end
  return tostring(v)
end

local function logger(level)
  return function(msg, fields)
    local flat = {}
    if fields ~= nil then
      if type(fields) ~= "table" then error("ls.log: fields must be a table", 2) end
      local keys = {}
      for k in pairs(fields) do keys[#keys + 1] = tostring(k) end
      table.sort(keys, key_order)
      for i, k in ipairs(keys) do
        local v = fields[k]
        if v == nil then v = fields[tonumber(k)] end
        flat[2 * i - 1], flat[2 * i] = k, log_value(v)
      end
    end
    core.log(level, tostring(msg), flat)
  end
end

ls.log = {
  debug = logger("debug"),
  info = logger("info"),
  warn = logger("warn"),
  error = logger("error"),
}

return ls
