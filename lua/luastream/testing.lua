-- luastream.testing: test handlers with busted, without a Redis server and
-- without waiting.
--
--   local testing = require "luastream.testing"
--   local app = testing.app("handlers")          -- the host, in process, clock paused
--   app:publish("payments", { id = 7, account = "migrating-acme", amount_cents = 500 }, { key = "migrating-acme" })
--   app:advance("30s")                           -- time moves only when the spec says so
--   assert.equal("1", app:received("post_payment")[2].headers[ls.DELIVERY_COUNT_HEADER])
--
-- The code under test is the code that ships: the same C host (subscriptions,
-- lanes, runtime, outcomes) with the in-memory broker and a virtual clock
-- plugged into its seams. See docs/testing.md.

local testing = {}

-- luastream_testing.so is built against LuaJIT: under another Lua it fails
-- to load with an unrelated-looking missing symbol, so say what to run.
if jit == nil then
  error("luastream.testing runs under LuaJIT: luajit /usr/bin/busted spec/", 0)
end

-- The C module is built next to the binary (build/ or build-test/). A spec run
-- from anywhere finds it through LUASTREAM_TESTING_LIB (the folder holding
-- luastream_testing.so), LUA_CPATH, or the build folders of this checkout.
local function load_core()
  local ok, core = pcall(require, "luastream_testing")
  if ok then return core end
  local here = debug.getinfo(1, "S").source:match("^@(.*)/lua/luastream/testing%.lua$") or "."
  local dirs = { os.getenv("LUASTREAM_TESTING_LIB"), here .. "/build-test", here .. "/build" }
  for _, dir in pairs(dirs) do
    local loader = package.loadlib(dir .. "/luastream_testing.so", "luaopen_luastream_testing")
    if loader then return loader() end
  end
  error("luastream.testing: cannot find luastream_testing.so; build it (./dev build) or set " ..
    "LUASTREAM_TESTING_LIB to the folder that holds it\n" .. tostring(core), 2)
end
local core = load_core()
package.loaded.luastream_testing = core -- ls.duration's parser, however it was found

local ls = require "luastream"           -- ls.duration, outside a host
local json = require "luastream.json"    -- the encoder ctx:publish uses
local H = core.headers                   -- the host's header names (wire.h)

local function duration(v)
  local ms, why = ls.duration(v)
  if not ms then error("a duration " .. why .. ": got " .. tostring(v), 3) end
  return ms
end

-- Splits an entry's flat field list into its message and headers, the way
-- the host does for a handler.
local function decode(fields)
  local headers, raw, data = {}, {}, nil
  for i = 1, #fields, 2 do
    local k, v = fields[i], fields[i + 1]
    raw[k] = v
    if k == H.DATA then data = v else headers[k] = v end
  end
  local message = raw
  if data ~= nil then
    local v = core.json_decode(data)        -- the host's own decoder
    if v == nil then message = data else message = v end
  end
  return message, headers, raw
end

---------------------------------------------------------------- HTTP stubs

-- What handlers' ls.http requests get: the stubs a spec declared and the
-- requests made, one set per broker (apps made with `with` share it, as
-- they share the outside world).
local Http = {}
Http.__index = Http

local function new_http() return setmetatable({ stubs = {}, requests = {} }, Http) end

local RESPONSE_KEYS = { status = true, headers = true, body = true, json = true, delay = true,
                        error = true }

-- A stub's response table checked and made plain for the C side:
-- {status, headers = {name = "value"}, body, delay (ms), error}.
local function stub_response(r, level)
  level = level + 1
  if type(r) ~= "table" then
    error("an HTTP stub's response must be a table (or a function returning one), got " .. type(r), level)
  end
  for k in pairs(r) do
    if not RESPONSE_KEYS[k] then
      error("an HTTP stub's response has no field " .. tostring(k) ..
        " (status, headers, body, json, delay, error)", level)
    end
  end
  local out = { status = r.status or 200, headers = {}, body = r.body, error = r.error, delay = 0 }
  if type(out.status) ~= "number" or out.status % 1 ~= 0 or out.status < 100 or out.status > 999 then
    error("an HTTP stub's status must be a number from 100 to 999, got " .. tostring(r.status), level)
  end
  if r.error ~= nil and type(r.error) ~= "string" then
    error("an HTTP stub's error must be a string (the transport failure), got " .. type(r.error), level)
  end
  if r.delay ~= nil then
    local ms, why = ls.duration(r.delay)
    if not ms then error("an HTTP stub's delay " .. why .. ": got " .. tostring(r.delay), level) end
    out.delay = ms
  end
  local typed = false
  if r.headers ~= nil and type(r.headers) ~= "table" then
    error("an HTTP stub's headers must be a table of name = value", level)
  end
  for k, v in pairs(r.headers or {}) do
    if type(k) ~= "string" or (type(v) ~= "string" and type(v) ~= "number") then
      error("an HTTP stub's headers must be name = string or number, got " .. tostring(k) .. " = " ..
        type(v), level)
    end
    out.headers[k] = tostring(v)
    typed = typed or k:lower() == "content-type"
  end
  if r.json ~= nil then
    if r.body ~= nil then error("an HTTP stub's response has body or json, not both", level) end
    local text, why = json.encode(r.json)
    if not text then error("an HTTP stub's json: " .. tostring(why), level) end
    out.body = text
    if not typed then out.headers["Content-Type"] = "application/json" end
  elseif r.body ~= nil and type(r.body) ~= "string" then
    error("an HTTP stub's body must be a string (or give json = a value), got " .. type(r.body), level)
  end
  return out
end

-- A URL matches a pattern that is the URL itself, or a Lua pattern that
-- matches the whole URL.
local function url_matches(pattern, url)
  if url == pattern then return true end
  local ok, found = pcall(string.find, url, "^" .. pattern .. "$")
  if not ok then error("the pattern " .. pattern .. ": " .. tostring(found), 0) end
  return found ~= nil
end

function Http:stub(method, pattern, response)
  if type(method) ~= "string" then error("http_stub: method must be a string (\"GET\", \"*\")", 3) end
  if type(pattern) ~= "string" then error("http_stub: pattern must be a string (a URL or a Lua pattern)", 3) end
  if type(response) ~= "function" then response = stub_response(response, 3) end
  self.stubs[#self.stubs + 1] = { method = method:upper(), pattern = pattern, response = response }
end

-- The C side's question for each request: its answer table, or nil when no
-- stub matches. The newest matching stub answers.
function Http:answer(req)
  if req.body ~= nil then
    local v = core.json_decode(req.body)
    if v ~= nil then req.json = v end
  end
  self.requests[#self.requests + 1] = req
  for i = #self.stubs, 1, -1 do
    local stub = self.stubs[i]
    if (stub.method == "*" or stub.method == req.method) and url_matches(stub.pattern, req.url) then
      local response = stub.response
      if type(response) == "function" then
        local copy = {}
        for k, v in pairs(req) do copy[k] = v end
        copy.headers = {}
        for k, v in pairs(req.headers) do copy.headers[k] = v end
        response = stub_response(response(copy), 1)
      end
      return response
    end
  end
  return nil
end

local App = {}
App.__index = App

-- testing.app(dir [, {version = "8.4.0", consumer = NAME, instance = N, hostname = NAME,
--                     handler_errors = "raise" | "record", with = other_app, redis = URL,
--                     postgres = CONNINFO, pg_once_table = NAME, pg_timeout = MS}])
-- starts every handler of dir on a fresh in-memory broker. A broker version
-- below 8.4 makes claiming subscriptions meet the version gate (the error is
-- raised here). With handler_errors = "raise" (the default) a handler that
-- fails makes the settle or advance that ran it fail, with its traceback.
-- with = another app starts a second host on that app's broker and clock.
-- postgres = a libpq connection string or URL: ls.pg's real server (there is
-- no SQL in memory; without it ls.pg raises, saying so).
-- Consumer names are made as by `luastream run` (hostname: this machine's
-- unless given); each host holds a lease on its names, so two apps with the
-- same name in a group behave as two processes would.
function testing.app(dir, opts)
  local copy = {}
  for k, v in pairs(opts or {}) do copy[k] = v end
  local http
  if copy.with then -- the C side wants the other app's core; the world's stubs are shared
    http = copy.with.http
    copy.with = copy.with.core
  else
    http = new_http()
    copy.http_answer = function(req) return http:answer(req) end
  end
  return setmetatable({ core = core.app(dir, copy), http = http }, App)
end

-- Runs everything due now: reads, handlers, outcomes.
function App:settle() self.core:settle() end

-- Moves the clock by ms (or "30s") and lets every consequence settle.
function App:advance(delay) self.core:advance(duration(delay)) end

-- The host's process stops for ms (or "25s"): SIGSTOP, a paused VM, a
-- stalled loop. The clock jumps and nothing runs; every timer that fell due
-- meanwhile fires late, in order, at the next settle (app:settle, publish,
-- command, advance, or testing.app(..., {with = app})). Commands sent before
-- that settle (a second host's, started "meanwhile") run before the late ones.
function App:pause(delay) self.core:pause(duration(delay)) end

-- This host alone stops for ms (or "25s") while the other hosts of its
-- broker run: SIGSTOP, a paused VM or a stuck loop on one machine. Its
-- timers (the heartbeat, reads, ls.sleep) and what the server answers it
-- wait while the clock advances for everyone else; the server still runs
-- what it sent before (a blocked read is served). Then the late timers fire
-- in the order they fell due, the held replies follow, and everything due
-- settles. ls.http stubs and ls.redis.connect servers are not held.
function App:stall(delay) self.core:stall(duration(delay)) end

-- The value of a metric on the metrics page (docs/operations.md), the
-- series whose labels include every label given: metric(name [, {label =
-- value}]) -> number, or nil when there is none. One registry for the
-- process: the hosts of one broker count into the same series.
function App:metric(name, labels)
  for line in self.core:metrics():gmatch("[^\n]+") do
    local metric, rest = line:match("^([%w_]+)(.*)$")
    if metric == name then
      local set, value = rest:match("^{(.*)} (%S+)$")
      if not set then set, value = "", rest:match("^ (%S+)$") end
      local have = {}
      for k, v in set:gmatch('([%w_]+)="([^"]*)"') do have[k] = v end
      local all = true
      for k, v in pairs(labels or {}) do
        if have[k] ~= tostring(v) then all = false end
      end
      if all and value then return tonumber(value) end
    end
  end
end

-- Milliseconds since the app started, on its clock.
function App:now() return self.core:now() end

function App:stop() self.core:stop() end

-- Hot reload, as when the handler directory changes (or on SIGHUP): files
-- whose content changed (force: every file) are loaded again, added files
-- start, removed ones stop; then everything due settles.
function App:reload(force) self.core:reload(force and true or false) end

-- What a file event does: a reload once the directory has been quiet for
-- 200 ms on the app's clock (advance to see it).
function App:reload_soon() self.core:reload_soon() end

-- true, or false and why: what GET /readyz would answer (docs/operations.md).
function App:ready() return self.core:ready() end

-- app:pause_group(stream, group [, {["for"] = "30s", reason = TEXT}]) pauses
-- a group on every host of the broker as `luastream pause` does (until
-- app:resume_group, or for the time given); app:resume_group(stream, group)
-- as `luastream resume`: 1 when it was paused, else 0.
function App:pause_group(stream, group, opts)
  opts = opts or {}
  local ms = opts["for"] ~= nil and duration(opts["for"]) or 0
  return assert(self.core:command("EVAL", core.pause_script, "1", core.pause_key(stream, group),
    "pause", tostring(ms), opts.reason or "paused by a spec", "spec"))
end

function App:resume_group(stream, group)
  return assert(self.core:command("EVAL", core.pause_script, "1", core.pause_key(stream, group), "resume"))
end

-- A Redis command on the in-memory broker: the reply, or nil and the error.
function App:command(...) return self.core:command(...) end

-- A Redis command on the server handlers reach with ls.redis.connect(url):
-- the reply, or nil and the error. Each distinct URL (the password aside) is
-- a server of its own, in memory on the app's clock (with {redis = URL}: the
-- real one at url), made on first use, so a spec may fill it before any
-- handler connects.
function App:command_on(url, ...) return self.core:command_on(url, ...) end

-- An outage of the in-memory server at url (nil: the host's own; down = true) or its end (false):
-- its connections drop (calls in flight fail) and calls are refused until
-- it ends; its data stays. Everything due settles.
function App:server_down(url, down) self.core:server_down(url, down and true or false) end

-- slow(command, delay [, url]): from now on each `command` a handler (or
-- anyone) sends to the in-memory server (the host's; with url, the one
-- ls.redis.connect(url) reaches) is answered delay late, the connection's
-- next commands waiting behind it, as behind a slow command on a server:
-- for tests of ls.redis call timeouts. slow() or a delay of 0: none is.
function App:slow(command, delay, url)
  self.core:slow(command, command and duration(delay or 0) or 0, url)
end

-- HTTP stubs (docs/testing.md, "HTTP stubs"): what handlers' ls.http
-- requests get. method: "GET", "POST", ... or "*"; pattern: the URL itself or
-- a Lua pattern matching the whole URL; response: {status = 200, headers =
-- {...}, body = "..." | json = value, delay = "2s", error = "refused"} or a
-- function(request) returning one. The newest matching stub answers; a
-- request none matches raises in the handler (its delivery fails).
function App:http_stub(method, pattern, response) self.http:stub(method, pattern, response) end

-- The requests handlers made, oldest first: {method, url, headers = {lower-case
-- name = value}, body, json (the body decoded, when it is JSON)}.
function App:http_requests()
  local out = {}
  for i, r in ipairs(self.http.requests) do out[i] = r end
  return out
end

-- With {redis = URL}: requests no stub matches go to real servers (on) or
-- raise as in memory (off, the default).
function App:http_passthrough(on) self.core:http_passthrough(on ~= false) end

-- publish(stream, msg [, {key = K, headers = {...}, partitions = N}]) -> id,
-- then settles. With partitions, the entry goes to partition
-- crc16(K) % N, "<stream>:{p}", as `luastream publish --partitions N
-- --key K` puts it (K is then required); the partition is the second result.
function App:publish(stream, msg, opts)
  opts = opts or {}
  local partition
  if opts.partitions ~= nil then
    if opts.key == nil then error("publish to " .. stream .. ": partitions needs a key", 2) end
    partition = testing.partition(opts.key, opts.partitions)
    stream = stream .. ":{" .. partition .. "}"
  end
  local args = { "XADD", stream, "*", H.DATA, type(msg) == "string" and msg or assert(json.encode(msg)) }
  if opts.key ~= nil then
    args[#args + 1] = H.PARTITION_KEY
    args[#args + 1] = tostring(opts.key)
  end
  for k, v in pairs(opts.headers or {}) do
    args[#args + 1] = tostring(k)
    args[#args + 1] = tostring(v)
  end
  local id, err = self.core:command(unpack(args))
  if not id then error("publish to " .. stream .. " failed: " .. tostring(err), 2) end
  self.core:settle()
  return id, partition
end

-- partition(key, n) -> the partition (0 .. n-1) of partition key key in a
-- stream of n partitions: crc16(key) % n (docs/consumer-groups-and-crash-recovery.md#partitioned-streams).
function testing.partition(key, n) return core.partition(tostring(key), n) end

-- Every delivery to the handler (file name without .lua), in order:
-- { id, message, headers, fields, outcome = "ack" | "retry" | "reply" |
--   "error" | "invalid", reason, error, version }: version is the script
-- version (content hash) that handled it. headers include delivery-count and
-- idle-ms on claimed entries (and on `new` entries read again from the own
-- pending list), as the handler saw them.
function App:received(handler)
  local out = {}
  for i, d in ipairs(self.core:deliveries(handler)) do
    local message, headers, raw = decode(d.fields)
    if d.deliveries >= 0 then
      headers[H.DELIVERY_COUNT] = string.format("%d", d.deliveries)
      headers[H.IDLE_MS] = string.format("%d", d.idle_ms)
    end
    out[i] = { id = d.id, message = message, headers = headers, fields = raw, outcome = d.outcome,
               reason = d.reason, error = d.error, handler = d.handler, version = d.version }
  end
  return out
end

-- The entries of a stream, oldest first: { id, message, headers, fields }.
function App:entries(stream)
  local reply = assert(self.core:command("XRANGE", stream, "-", "+"))
  local out = {}
  for i, e in ipairs(reply) do
    local message, headers, raw = decode(e[2])
    out[i] = { id = e[1], message = message, headers = headers, fields = raw }
  end
  return out
end

function App:xlen(stream) return assert(self.core:command("XLEN", stream)) end

-- The pending entries of a group: { id, consumer, idle (ms), deliveries }.
function App:pending(stream, group)
  local reply, err = self.core:command("XPENDING", stream, group, "-", "+", "1000000")
  if not reply then error(err, 2) end
  local out = {}
  for i, p in ipairs(reply) do
    out[i] = { id = p[1], consumer = p[2], idle = p[3], deliveries = p[4] }
  end
  return out
end

-- The host's log lines so far (logfmt), oldest first.
function App:logs() return self.core:logs() end

-- One logfmt line as a table of its keys (values unquoted and unescaped as
-- host/base/log.c writes them).
local UNESCAPE = { n = "\n", r = "\r", t = "\t" }
function testing.logfmt(line)
  local rec, i, n = {}, 1, #line
  while true do
    local _, e, key = line:find("^%s*([^%s=]+)=", i)
    if not e then return rec end
    i = e + 1
    if line:sub(i, i) == '"' then
      local buf, j = {}, i + 1
      while j <= n and line:sub(j, j) ~= '"' do
        local c = line:sub(j, j)
        if c == "\\" then
          local esc = line:sub(j + 1, j + 1)
          if esc == "u" then
            buf[#buf + 1] = string.char(tonumber(line:sub(j + 2, j + 5), 16))
            j = j + 6
          else
            buf[#buf + 1] = UNESCAPE[esc] or esc
            j = j + 2
          end
        else
          buf[#buf + 1] = c
          j = j + 1
        end
      end
      rec[key] = table.concat(buf)
      i = j + 1
    else
      local v = line:match("^%S*", i)
      rec[key] = v
      i = i + #v
    end
  end
end

-- The log lines so far whose msg is msg, each as a table (testing.logfmt).
function App:records(msg)
  local out = {}
  for _, line in ipairs(self.core:logs()) do
    local rec = testing.logfmt(line)
    if rec.msg == msg then out[#out + 1] = rec end
  end
  return out
end

return testing
