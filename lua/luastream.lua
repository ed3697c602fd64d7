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
  core = { version = "outside a host", log = outside, sleep = outside, redis = outside,
           redis_result = outside, redis_connect = outside, http = outside,
           http_result = outside, http_headers = outside, json_decode = outside }
end

-- Outside a host, the test harness module (luastream_testing.so) offers what
-- luastream.core would: the duration parser and the wire names. Looked up on
-- first use, so requiring this file before luastream.testing is fine.
local function host_module()
  if has_core then return core end
  local testing_core = package.loaded.luastream_testing
  if not testing_core then
    local ok, loaded = pcall(require, "luastream_testing")
    testing_core = ok and loaded or nil
  end
  return testing_core
end

local ls = {}

ls.VERSION = core.version

-- Header names (entry fields other than `data`) that luastream reads or
-- writes, as ls.<NAME>_HEADER: ls.PARTITION_KEY_HEADER, ls.DELIVERY_COUNT_HEADER,
-- ls.IDLE_MS_HEADER, ls.ORIGINAL_ID_HEADER, ls.RETRY_GROUP_HEADER,
-- ls.CONTENT_TYPE_HEADER, ls.HANDLER_VERSION_HEADER, ls.DL_REASON_HEADER, ...
-- The names are the host's (host/base/wire.h, through luastream.core.headers),
-- so Lua cannot spell one differently.
setmetatable(ls, {
  __index = function(t, k)
    local name = type(k) == "string" and k:match("^(.+)_HEADER$")
    if not name then return nil end
    local host = host_module()
    if not (host and host.headers) then
      error("ls." .. k .. " needs the luastream host or its test harness module (luastream_testing.so)", 2)
    end
    local known = {}
    for n, text in pairs(host.headers) do
      if n ~= "DATA" then
        rawset(t, n .. "_HEADER", text)
        known[#known + 1] = "ls." .. n .. "_HEADER"
      end
    end
    local text = rawget(t, k)
    if text == nil then
      -- a misspelt name would read as nil and match no header, silently
      table.sort(known)
      error("ls." .. k .. " is not a header luastream uses; it has " .. table.concat(known, ", "), 2)
    end
    return text
  end,
})

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

-- retry_after(ms | "30s"): deliver again once the delay has passed. Durable:
-- the entry waits in Redis (pending, or in the group's delay set), not in the
-- host, so a host that stops meanwhile loses nothing.
-- A bad delay is not raised here: `return ls.retry_after(x)` is a tail call,
-- so no error position could name the handler's line. The host reports it
-- as a bad return value instead, with the same words.
function ls.retry_after(delay)
  return { retry_after = delay, outcome = "retry_after" } -- outcome: a nil delay is still one
end

-- reject(reason): dead-letter the entry now, whatever its delivery count.
function ls.reject(reason)
  return { reject = reason == nil and "rejected" or tostring(reason) }
end

-- pause(delay, reason): the dependency this handler needs is down. The entry
-- goes back without counting a delivery, and the subscription pauses on
-- every host for delay (ms or "30s"; capped at the handler's
-- breaker.max_pause, 5 minutes unless it says), then one host probes with one
-- entry: success resumes everyone, failure pauses again for twice as long.
-- delay may be an ls.http response's retry_after.
-- A bad delay is reported as a bad return value, as for ls.retry_after.
function ls.pause(delay, reason)
  -- outcome: a missing delay is still a pause, reported as such
  return { pause = delay, outcome = "pause", reason = reason == nil and "paused by the handler" or tostring(reason) }
end

-- backoff{base = "1s", factor = 2, max = "5m", jitter = 0.2} -> function(ctx)
-- giving the delay before the next delivery from the entry's delivery count:
-- base * factor^(deliveries before this one), capped at max, then spread by
-- +/- jitter (a fraction) so entries that failed together do not return
-- together.   return ls.retry_after(backoff(ctx))
function ls.backoff(opts)
  opts = opts or {}
  -- error(), not assert(): LuaJIT's assert names this file, not the caller's.
  local base = ls.duration(opts.base or 1000)
  if not base then error("ls.backoff: base must be a duration", 2) end
  local max = ls.duration(opts.max or 300000)
  if not max then error("ls.backoff: max must be a duration", 2) end
  local factor, jitter = opts.factor or 2, opts.jitter or 0
  if type(factor) ~= "number" or factor < 1 then error("ls.backoff: factor must be a number >= 1", 2) end
  if type(jitter) ~= "number" or jitter < 0 or jitter >= 1 then
    error("ls.backoff: jitter must be a fraction in [0, 1)", 2)
  end
  return function(ctx)
    -- ctx.deliveries is the host's count; a producer's delivery-count header
    -- must not stretch the delay.
    local n
    if type(ctx) == "table" then
      n = ctx.deliveries or tonumber(ctx.headers and ctx.headers[ls.DELIVERY_COUNT_HEADER])
    else
      n = tonumber(ctx)
    end
    n = n or 0
    local delay = math.min(max, base * factor ^ n)
    if jitter > 0 then delay = delay * (1 + jitter * (2 * math.random() - 1)) end
    return math.floor(math.min(max, delay))
  end
end

---------------------------------------------------------------- durations

-- The parser is the host's (duration.c), the one the command line uses too:
-- luastream.core inside a host, the harness module (luastream_testing) in a
-- busted spec.
local parse_duration
local function duration_parser()
  local host = host_module()
  if not (host and host.duration) then
    error("ls.duration needs the luastream host or its test harness module (luastream_testing.so)", 3)
  end
  return host.duration
end

-- duration(v): milliseconds from a number (milliseconds) or a string with a
-- unit: "250ms", "30s", "5m", "1h". A string without a unit ("30") is
-- refused: text must say what it means. Returns nil and a reason otherwise.
function ls.duration(v)
  parse_duration = parse_duration or duration_parser()
  return parse_duration(v)
end

-- sleep(ms | "2s"): waits on the host's clock. Only the calling handler waits:
-- the other lanes keep running.
function ls.sleep(delay)
  local ms, why = ls.duration(delay)
  if not ms then error("ls.sleep: delay " .. why, 2) end
  return core.sleep(ms)
end

---------------------------------------------------------------- redis

-- Commands on the host's own server, from a running handler. The handler
-- waits (the other lanes keep running); calls of many handlers at once share
-- one connection, pipelined. Replies read as in Redis scripting: bulk ->
-- string, integer -> number, nil -> false, array -> table, status ->
-- {ok = "..."}, an error inside an array -> {err = "..."}.
--   call(cmd, ...)   the reply; raises on an error reply, a timeout or a lost
--                    connection (the entry then stays pending, as with any error)
--   pcall(cmd, ...)  the reply, or nil and the error's text (a refused command or a bad
--                    argument raises all the same: a mistake, not a reply)
--   with_timeout(ms | "2s") -> {call = ..., pcall = ...} with that timeout
--                    instead of the host's (5 s unless set)
--   connect(url)     -> a client with the same call, pcall and with_timeout
--                    for another server (redis://[[user]:password@]host[:port][/db]
--                    or unix://...); the host keeps one connection per URL
-- A call is never sent again on its own: after a timeout or a lost
-- connection the command may or may not have run.
local function redis_client(ms, url, server)
  local send, result = core.redis, core.redis_result
  -- the function the handler called, for errors: core.redis names it
  local prefix = url and "ls.redis.connect(\"" .. server .. "\")" or "ls.redis"
  local call_name, pcall_name = prefix .. ".call", prefix .. ".pcall"
  local client = {}
  function client.call(...)
    send(url, server, call_name, ms, ...)
    local reply, err = result()
    if reply == nil then error(err, 2) end
    return reply
  end
  function client.pcall(...)
    send(url, server, pcall_name, ms, ...)
    return result()
  end
  return client
end

local function with_timeout(url, server)
  return function(timeout)
    local ms, why = ls.duration(timeout)
    if not ms then error("ls.redis.with_timeout: timeout " .. why, 2) end
    if ms <= 0 then error("ls.redis.with_timeout: timeout must be above 0", 2) end
    return redis_client(math.ceil(ms), url, server)
  end
end

ls.redis = redis_client(0)
ls.redis.with_timeout = with_timeout()

-- connect(url): a client for another server. Nothing is sent here: the
-- host opens the connection (once per distinct URL, shared by every
-- handler) and calls wait on it like ls.redis.call. A bad URL raises here,
-- naming what is wrong and never the password.
function ls.redis.connect(url)
  if type(url) ~= "string" then
    error("ls.redis.connect: the URL must be a string, got " .. type(url), 2)
  end
  local server = core.redis_connect(url)
  local client = redis_client(0, url, server)
  client.with_timeout = with_timeout(url, server)
  return client
end

---------------------------------------------------------------- http

-- request{method = "POST", url = URL, headers = {name = value}, body = STRING
--         | json = VALUE, timeout = "5s", max_body = BYTES, follow_redirects = true}
-- -> res ({status = 200, headers = {["content-type"] = ...}, body = "..."},
-- res:json() decoding the body) or nil, err for a request that got no
-- response (refused, DNS, timeout, TLS, a body over max_body). A 4xx or 5xx
-- is a response: check res.status. The handler waits, the other lanes keep
-- running. Never sent again on its own: after a timeout the server may have
-- acted on it, so send ctx.idempotency_key as the Idempotency-Key header
-- where the server honours one.
local json_encode_http = require("luastream.json").encode

-- A response: status and body, the header lines kept as they came until
-- res.headers is first read (most handlers never do). res.retry_after is
-- the Retry-After header as ms to wait (capped at a day), counted from when
-- it is first read, or nil when absent, malformed or given twice with
-- different waits (core.http_retry_after, host/http/http.h).
local HEADER_LINES = {}
local function response_json(res) return core.json_decode(res.body) end
local RESPONSE = {
  __index = function(res, k)
    if k == "json" then return response_json end
    if k == "headers" then
      local headers = core.http_headers(rawget(res, HEADER_LINES))
      rawset(res, "headers", headers)
      return headers
    end
    if k == "retry_after" then
      local ms = core.http_retry_after(rawget(res, HEADER_LINES))
      rawset(res, "retry_after", ms) -- nil sets nothing: read again, nil again
      return ms
    end
  end,
}

local function header_lines(headers, name)
  local lines, typed = {}, false
  if headers == nil then return lines, typed end
  if type(headers) ~= "table" then error(name .. ": headers must be a table of name = value", 3) end
  for k, v in pairs(headers) do
    if type(k) ~= "string" then error(name .. ": a header name must be a string, got " .. type(k), 3) end
    if k == "" or k:find("[%c :]") then
      error(name .. ": header name " .. string.format("%q", k) .. " holds a space, a colon or a control character", 3)
    end
    if type(v) == "number" then v = json_encode_http(v) end
    if type(v) ~= "string" then
      error(name .. ": header " .. k .. " must be a string or a number, got " .. type(v), 3)
    end
    lines[#lines + 1] = k .. ": " .. v
    typed = typed or k:lower() == "content-type"
  end
  return lines, typed
end

-- Called in tail position by ls.http.*, so error level 2 is the handler's
-- line (3 from header_lines; core.http raises at the handler itself).
local function http_request(opts, name, method, url)
  if type(opts) ~= "table" then error(name .. ": expects a table of options, got " .. type(opts), 2) end
  method, url = method or opts.method or "GET", url or opts.url
  if type(method) ~= "string" then error(name .. ": method must be a string", 2) end
  if type(url) ~= "string" then error(name .. ": url must be a string, got " .. type(url), 2) end
  local lines, typed = header_lines(opts.headers, name)
  local body = opts.body
  if opts.json ~= nil then
    if body ~= nil then error(name .. ": give body or json, not both", 2) end
    local why
    body, why = json_encode_http(opts.json)
    if not body then error(name .. ": json: " .. tostring(why), 2) end
    if not typed then lines[#lines + 1] = "Content-Type: application/json" end
  elseif body ~= nil and type(body) ~= "string" then
    error(name .. ": body must be a string (or give json = a value), got " .. type(body), 2)
  end
  local timeout = 0
  if opts.timeout ~= nil then
    local why
    timeout, why = ls.duration(opts.timeout)
    if not timeout then error(name .. ": timeout " .. why, 2) end
    if timeout <= 0 then error(name .. ": timeout must be above 0", 2) end
  end
  local max_body = opts.max_body or 0
  if type(max_body) ~= "number" or max_body < 0 or max_body % 1 ~= 0 then
    error(name .. ": max_body must be a number of bytes", 2)
  end
  core.http(name, method:upper(), url, lines, body, math.ceil(timeout), max_body,
            opts.follow_redirects == true)
  -- the response's header lines, or what went wrong when there is no status
  local status, got, text = core.http_result()
  if not status then
    if text then error(got, 2) end -- the request itself is at fault (no stub for it)
    return nil, got
  end
  return setmetatable({ status = status, body = text, [HEADER_LINES] = got }, RESPONSE)
end

ls.http = {}

-- ls.pg: PostgreSQL (luastream/pg.lua).
ls.pg = require("luastream.pg")

-- ls.rate: rate limits shared by every host (luastream/rate.lua).
ls.rate = require("luastream.rate")

function ls.http.request(opts)
  return http_request(opts, "ls.http.request")
end

-- get(url [, opts]), post(url, opts): request with that method and url.
function ls.http.get(url, opts)
  return http_request(opts or {}, "ls.http.get", "GET", url)
end

function ls.http.post(url, opts)
  return http_request(opts or {}, "ls.http.post", "POST", url)
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

-- The value's logfmt text, and whether that text is a number's JSON (a JSON
-- log line then writes it as a number; NaN and infinities stay strings).
local function log_value(v)
  local t = type(v)
  if t == "number" then -- as in a reply: digits that read back the same
    local text = json_encode(v)
    if text then return text, true end
    return tostring(v), false
  elseif t == "table" then
    return json_encode(v) or tostring(v), false
  end
  return tostring(v), false
end

local function logger(level)
  return function(msg, fields)
    local flat, numeric = {}, {}
    if fields ~= nil then
      if type(fields) ~= "table" then error("ls.log: fields must be a table", 2) end
      local keys = {}
      for k in pairs(fields) do keys[#keys + 1] = tostring(k) end
      table.sort(keys, key_order)
      for i, k in ipairs(keys) do
        local v = fields[k]
        if v == nil then v = fields[tonumber(k)] end
        flat[2 * i - 1], flat[2 * i], numeric[i] = k, log_value(v)
      end
    end
    core.log(level, tostring(msg), flat, numeric)
  end
end

ls.log = {
  debug = logger("debug"),
  info = logger("info"),
  warn = logger("warn"),
  error = logger("error"),
}

return ls
