-- luastream.rate: ls.rate, rate limits shared by every host through Redis
-- (docs/handlers.md, "Rate limits: ls.rate.take").
--
--   ls.rate.take(name, spec [, key] [, {timeout = "2s"}]) -> true, or nil, why
--     when no permit comes within the timeout
--
-- spec: "200/s", "30/m", "1000/h", optionally "200/s burst 400", or
-- {rate = "200/s", burst = 400}. The limiter is GCRA (the generic cell rate
-- algorithm) in a script on the host's Redis, on Redis's own clock (TIME):
-- one key per limiter, luastream:limit:{NAME} (per key:
-- luastream:limit:{NAME}:KEY, the hash tag keeping a limiter's keys in one
-- cluster slot; "limit", not the handler fields' "rate", so that no name
-- and key meet a group's limiter, luastream:rate:{STREAM}:GROUP...),
-- holding the theoretical arrival time of the next permit in microseconds
-- and expiring once the limiter is idle again.
--
-- Permits are taken in chunks: one call asks for a 20th of a second's
-- permits (at least 1, at most the burst; under load it waits until a whole
-- chunk is free), and the Lua state keeps those its caller did not use for
-- the next takes of the same limiter, for at most the time those permits
-- stand for (capped at 100 ms); while one lane's call is out, the state's
-- other lanes wait for its permits instead of calling too. So a busy
-- limiter costs about one Redis call per chunk and Lua state, not per
-- permit, and hosts share it in small slices. The price: a permit taken at the end of one window may be
-- used in the next, so a window of W may see up to burst + rate x W plus a
-- chunk per Lua state using the limiter; permits held past their time are
-- dropped, never used late.
local ls_core -- luastream.core, or the harness's, on first use
local json_encode = require("luastream.json").encode

local M = {}

local NAME_MAX, KEY_MAX = 200, 1024
local VALID_MS = 100 -- permits held ahead stay usable at most this long

-- The rule itself is the host's SCRIPT_RATE (host/broker/scripts/rate.lua),
-- the one the handler fields rate and rate_per_key use: luastream.core
-- hands its text over as rate_script.

local PERIODS = { s = 1, m = 60, h = 3600 }
local UNITS = { s = "second", m = "minute", h = "hour" }

local function count(v)
  local n = tonumber(v)
  if n and n > 0 and n < math.huge then return n end
end

-- The limiter a spec describes: {interval = us per permit, burst, chunk},
-- or nil and why.
local function parse(spec)
  local rate, burst
  if type(spec) == "table" then
    rate, burst = spec.rate, spec.burst
    if type(rate) ~= "string" then return nil, "spec's rate must be text such as \"200/s\"" end
    if burst ~= nil and (type(burst) ~= "number" or burst < 1 or burst % 1 ~= 0 or burst == math.huge) then
      return nil, "spec's burst must be a whole number >= 1, got " .. tostring(burst)
    end
  elseif type(spec) == "string" then
    local r, b = spec:match("^%s*(%S+)%s+burst%s+(%S+)%s*$")
    rate = r or spec
    if b then
      burst = tonumber(b)
      if not burst or burst < 1 or burst % 1 ~= 0 or burst == math.huge then
        return nil, string.format("spec %q: burst must be a whole number >= 1", spec)
      end
    end
  else
    return nil, "spec must be text such as \"200/s\" or {rate = \"200/s\", burst = 400}, got " .. type(spec)
  end
  local n, unit = rate:match("^%s*([%d.]+)%s*/%s*(%a+)%s*$")
  local per = PERIODS[unit or ""]
  n = count(n)
  if not (n and per) then
    return nil, string.format("spec %q must be permits per second, minute or hour: \"200/s\", \"30/m\", " ..
                              "\"1000/h\", optionally followed by \"burst N\"", type(spec) == "table" and rate or spec)
  end
  local per_second = n / per
  local chunk = math.max(1, math.floor(per_second / 20))
  burst = burst or chunk
  chunk = math.min(chunk, burst)
  local interval = per * 1e6 / n -- us
  return { interval = interval, burst = burst, chunk = chunk,
           valid = math.min(VALID_MS, chunk * interval / 1000), text = n .. " per " .. UNITS[unit] }
end

-- Parsed specs, by the text or table given (a spec built per call is
-- parsed each time once the texts cached reach 1000).
local parsed = setmetatable({}, { __mode = "k" })
local parsed_text, ntext = {}, 0
M.parse = parse

local function limiter(spec)
  local cache = type(spec) == "table" and parsed or parsed_text
  local l = cache[spec]
  if l then return l end
  local why
  l, why = parse(spec)
  if not l then return nil, why end
  if type(spec) == "table" then
    parsed[spec] = l
  elseif ntext < 1000 then
    parsed_text[spec], ntext = l, ntext + 1
  end
  return l
end

local function key_text(key)
  if type(key) == "number" then
    local text = json_encode(key)
    if not text then return nil, "key must be a finite number, got " .. tostring(key) end
    return text
  elseif type(key) ~= "string" then
    return nil, "key must be a string or a number, got " .. type(key)
  elseif #key == 0 or #key > KEY_MAX then
    return nil, "key must be 1 to " .. KEY_MAX .. " bytes long, got " .. #key
  end
  return key
end

local function core()
  if not ls_core then
    local ok, c = pcall(require, "luastream.core")
    if not ok then error("ls.rate.take: only available inside a running luastream host", 4) end
    ls_core = c
  end
  return ls_core
end

local function now() return core().now() end

-- What this Lua state knows of each limiter it uses, by Redis key: permits
-- taken ahead and not yet used (n, usable until expires), when a lane's
-- call for it went out (asking, so that the other lanes wait for its
-- permits instead of calling too), and when the next chunk should be free
-- (next_at): lanes that arrive earlier sleep until then without a call.
-- Times are ms on the host's clock.
local INFLIGHT_MS = 1000 -- a call out longer than this (or abandoned) no longer holds the others
local states, nstates = {}, 0

local function sweep(t)
  for k, st in pairs(states) do
    if st.expires <= t and st.next_at <= t and st.asking + INFLIGHT_MS <= t then
      states[k] = nil
      nstates = nstates - 1
    end
  end
end

local function state(rkey, t)
  local st = states[rkey]
  if st then return st end
  if nstates >= 256 then sweep(t) end
  st = { n = 0, expires = 0, asking = -INFLIGHT_MS, next_at = 0 }
  states[rkey], nstates = st, nstates + 1
  return st
end

-- take(name, spec [, key] [, opts]): waits (ls.sleep: only this entry
-- waits, other lanes run) until the limiter grants a permit, then returns
-- true. opts.timeout (ms or "2s"): give up when no permit can come by then,
-- returning nil and why at once, without waiting for nothing. A bad
-- argument raises; so does a Redis call that fails (as ls.redis.call does).
function M.take(name, spec, key, opts)
  if opts == nil and type(key) == "table" then key, opts = nil, key end
  if type(name) ~= "string" then error("ls.rate.take: name must be a string, got " .. type(name), 2) end
  if #name == 0 or #name > NAME_MAX or name:find("[^\32-\126]") or name:find("[{}]") then
    error(string.format("ls.rate.take: name %q must be 1 to %d printable characters, without { or }",
                        name, NAME_MAX), 2)
  end
  local l, why = limiter(spec)
  if not l then error("ls.rate.take: " .. why, 2) end
  local rkey = "luastream:limit:{" .. name .. "}"
  if key ~= nil then
    local text
    text, why = key_text(key)
    if not text then error("ls.rate.take: " .. why, 2) end
    rkey = rkey .. ":" .. text
  end
  local ls = require("luastream") -- loaded: it is what requires this file
  local deadline
  if opts ~= nil then
    if type(opts) ~= "table" then error("ls.rate.take: options must be a table, got " .. type(opts), 2) end
    if opts.timeout ~= nil then
      local ms
      ms, why = ls.duration(opts.timeout)
      if not ms then error("ls.rate.take: timeout " .. why, 2) end
      if ms < 0 then error("ls.rate.take: timeout must not be below 0", 2) end
      deadline = now() + ms
    end
  end
  local interval, tolerance = string.format("%.3f", l.interval), string.format("%.3f", l.interval * l.burst)
  -- Under load a take waits for a whole chunk (one call for many permits);
  -- with a deadline a chunk would miss, for one permit.
  local least = l.chunk
  while true do
    local t = now()
    local st = state(rkey, t)
    if st.n >= 1 and st.expires > t then
      st.n = st.n - 1
      return true
    end
    if deadline and t >= deadline then
      return nil, string.format("ls.rate.take: %s (%s): no permit within the timeout", name, l.text)
    end
    if st.asking + INFLIGHT_MS > t then
      ls.sleep(1) -- another lane's call is out: its permits come first
    elseif st.next_at > t and not deadline then
      ls.sleep(st.next_at - t)
    else
      st.asking = t
      local reply, err = ls.redis.pcall("EVAL", core().rate_script, 1, rkey, interval, tolerance, l.chunk, least)
      st.asking = -INFLIGHT_MS
      if not reply then error("ls.rate.take: " .. tostring(err), 2) end
      local granted, wait = tonumber(reply[1]) or 0, tonumber(reply[2]) or 1
      t = now()
      if granted >= 1 then
        st.n, st.expires = granted - 1, t + l.valid
        st.next_at = (tonumber(reply[3]) or 0) >= 1 and t or t + least * l.interval / 1000
        return true
      end
      st.next_at = t + wait
      if deadline and t + wait > deadline then
        local one = math.max(1, math.ceil(wait - (least - 1) * l.interval / 1000))
        if least == 1 or t + one > deadline then
          return nil, string.format("ls.rate.take: %s (%s): no permit within the timeout (the next in %dms)",
                                    name, l.text, one)
        end
        least, wait = 1, one
      end
      ls.sleep(wait)
    end
  end
end

return M
