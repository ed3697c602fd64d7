-- GET /metrics scraped over real HTTP from a host on a real redis-server,
-- parsed by a strict reader of the Prometheus text format (below), and
-- checked against what the spec made happen: N entries -> N acks, a
-- rejected and a bad entry -> their dead-letter reasons, a handler error,
-- retries, delays, a reload, a Redis restart -> a reconnect, a group's lag
-- rising while its consumer does not read.
local helper = require "tests.integration.helper"

local READY = 'msg="host ready"'

-- ---- a strict reader of the text exposition format (0.0.4) ----

local function unescape_label(s)
  return (s:gsub("\\(.)", function(c)
    if c == "n" then return "\n" end
    if c == "\\" or c == '"' then return c end
    error("bad escape \\" .. c .. " in a label value")
  end))
end

-- "{a=\"x\",b=\"y\"}" -> {a = "x", b = "y"}; errors on anything else.
local function parse_labels(text)
  local labels, pos = {}, 2
  if text == "" then return labels end
  assert(text:sub(1, 1) == "{" and text:sub(-1) == "}", "labels not in braces: " .. text)
  while pos < #text do
    local name, after = text:match("^([%a_][%w_]*)=\"()", pos)
    assert(name, "bad label name at " .. text:sub(pos))
    local value_end = after
    while true do
      local c = text:sub(value_end, value_end)
      assert(c ~= "", "unterminated label value in " .. text)
      if c == "\\" then value_end = value_end + 2
      elseif c == '"' then break
      else value_end = value_end + 1 end
    end
    assert(labels[name] == nil, "label " .. name .. " twice in " .. text)
    labels[name] = unescape_label(text:sub(after, value_end - 1))
    pos = value_end + 1
    local sep = text:sub(pos, pos)
    if sep == "," then pos = pos + 1 else assert(sep == "}", "bad separator in " .. text) end
  end
  return labels
end

local function parse_value(v)
  if v == "+Inf" then return math.huge end
  if v == "-Inf" then return -math.huge end
  if v == "NaN" then return 0 / 0 end
  assert(v:match("^%-?%d+%.?%d*[eE]?[%-+]?%d*$"), "bad value " .. v)
  return assert(tonumber(v))
end

--[[ Returns families by name: {type, help, samples = {{name, labels, value}}}.
Errors on: a sample before its TYPE, a TYPE twice, a family split in two,
names or labels that do not parse, a histogram whose buckets are not
cumulative or whose +Inf bucket differs from _count, a counter below 0. ]]
local function parse_page(page)
  assert(page:sub(-1) == "\n", "the page must end with a newline")
  local families, current = {}, nil
  for line in page:gmatch("([^\n]*)\n") do
    local name, help = line:match("^# HELP ([%a_:][%w_:]*) (.*)$")
    local tname, ttype = line:match("^# TYPE ([%a_:][%w_:]*) (%a+)$")
    if name then
      families[name] = families[name] or { samples = {} }
      assert(families[name].help == nil, "HELP twice for " .. name)
      families[name].help = help
    elseif tname then
      assert(ttype == "counter" or ttype == "gauge" or ttype == "histogram", "type " .. ttype)
      local f = families[tname] or { samples = {} }
      assert(f.type == nil, "TYPE twice for " .. tname)
      assert(#f.samples == 0, "TYPE after samples for " .. tname)
      f.type = ttype
      families[tname] = f
      current = tname
    else
      assert(line ~= "" and not line:match("^#"), "unexpected line: " .. line)
      local sname, labels, value = line:match("^([%a_:][%w_:]*)(%b{}) (%S+)$")
      if not sname then
        sname, value = line:match("^([%a_:][%w_:]*) (%S+)$")
        labels = ""
      end
      assert(sname, "bad sample line: " .. line)
      local base = sname:gsub("_bucket$", ""):gsub("_sum$", ""):gsub("_count$", "")
      local fname = families[sname] and sname or base
      assert(fname == current, "sample " .. sname .. " outside its family (" .. tostring(current) .. ")")
      local f = families[fname]
      local sample = { name = sname, labels = parse_labels(labels), value = parse_value(value) }
      if f.type == "counter" then assert(sample.value >= 0, "counter below 0: " .. line) end
      f.samples[#f.samples + 1] = sample
    end
  end
  for name, f in pairs(families) do
    assert(f.type and f.help, name .. " lacks TYPE or HELP")
    if f.type == "histogram" then
      local last, count = {}, {}
      for _, s in ipairs(f.samples) do
        local key = {}
        for k, v in pairs(s.labels) do if k ~= "le" then key[#key + 1] = k .. "=" .. v end end
        table.sort(key)
        key = table.concat(key, ",")
        if s.name == name .. "_bucket" then
          assert(s.value >= (last[key] or 0), "buckets not cumulative in " .. name)
          last[key] = s.value
          if s.labels.le == "+Inf" then count[key] = s.value end
        elseif s.name == name .. "_count" then
          assert(count[key] == s.value, "+Inf bucket differs from _count in " .. name)
        end
      end
    end
  end
  return families
end

-- The value of family name's sample whose labels include want (nil: none).
local function value(families, name, want, sample_name)
  local f = families[name]
  if not f then return nil end
  for _, s in ipairs(f.samples) do
    if s.name == (sample_name or name) then
      local ok = true
      for k, v in pairs(want or {}) do if s.labels[k] ~= v then ok = false end end
      if ok then return s.value end
    end
  end
end

local function scrape(port)
  local code, body, text = helper.http_get(port, "/metrics")
  assert.equal(200, code)
  assert.truthy(text:find("\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n", 1, true), text)
  return parse_page(body), body
end

-- promtool (Debian's prometheus package, which ./dev installs) on a page or
-- a rules file: its exit code and output.
local function promtool(args, input)
  local dir = helper.tmpdir("promtool")
  local path = dir .. "/in"
  helper.write_file(path, input or "")
  local argv = { "promtool" }
  for _, a in ipairs(args) do argv[#argv + 1] = a end
  local cmd = {}
  for _, a in ipairs(argv) do cmd[#cmd + 1] = "'" .. a:gsub("'", "'\\''") .. "'" end
  local p = io.popen(table.concat(cmd, " ") .. " < '" .. path .. "' 2>&1")
  local out = p:read("*a")
  local ok, _, code = p:close()
  return ok and 0 or code, out
end

local HANDLER = [[
local ls = require "luastream"
return {
  stream = "payments", group = "ledger", start = "beginning", workers = 8,
  dead_letter = "payments.dead", max_deliveries = 3,
  handle = function(p, ctx)
    if p.op == "reject" then return ls.reject("account closed") end
    if p.op == "fail" then error("boom") end
    if p.op == "retry" then return ls.retry() end
    if p.op == "later" and ctx.deliveries == 0 then return ls.retry_after("100ms") end
    if p.op == "much_later" then return ls.retry_after("1h") end
    if p.op == "sleep" then ls.sleep(30) end
  end,
}
]]

describe("GET /metrics", function()
  after_each(helper.cleanup)

  it("shows a group's lag rising while its consumer does not read", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["stuck.lua"] = [[
local ls = require "luastream"
return { stream = "payments", group = "slow", start = "beginning", batch = 1,
  handle = function() ls.sleep("1h") end }
]] })
    local host = helper.host_start({ "--http", "127.0.0.1:0", "--shutdown-timeout", "100ms" },
      { server = srv, dir = dir })
    host:wait_log(READY, 20, { plain = true })
    local port = helper.health_port(host)
    local G = { stream = "payments", group = "slow" }
    local function lag_after(n)
      local cmds = {}
      for i = 1, n do cmds[i] = { "XADD", "payments", "*", "data", '{"id":1}' } end
      srv:pipe(cmds)
      local lag
      helper.wait_until(function()
        lag = value(scrape(port), "luastream_group_lag", G)
        return lag and lag >= n - 3
      end, 20, "the lag after " .. n .. " more entries")
      return lag
    end
    local first = lag_after(10)
    local second = lag_after(20)
    assert.is_true(second >= first + 10, "lag " .. first .. " then " .. second)
    local page = scrape(port)
    assert.is_true(value(page, "luastream_group_pending", G) >= 1)
    assert.equal(1, value(page, "luastream_lanes_busy", { handler = "stuck" }))
    assert.equal(0, host:stop())
  end)

  it("counts no error at a start on groups that exist (BUSYGROUP is the expected answer)", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["post.lua"] = HANDLER })
    local first = helper.host_start({}, { server = srv, dir = dir })
    first:wait_log(READY, 20, { plain = true })
    assert.equal(0, first:stop())
    local host = helper.host_start({ "--http", "127.0.0.1:0" }, { server = srv, dir = dir })
    host:wait_log(READY, 20, { plain = true })
    assert(srv:group("payments", "ledger"), "the group made by the first start")
    local page = scrape(helper.health_port(host))
    assert.equal(0, value(page, "luastream_redis_errors_total", { kind = "error_reply" }))
    assert.equal(0, host:stop())
  end)

  it("shows every counter series the alerts and the dashboard use at 0 right after start", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["post.lua"] = HANDLER, ["plain.lua"] = [[
return { stream = "orders", group = "ship", handle = function() end }
]] })
    local host = helper.host_start({ "--http", "127.0.0.1:0" }, { server = srv, dir = dir })
    host:wait_log(READY, 20, { plain = true })
    local page, body = scrape(helper.health_port(host))
    local L = { handler = "post", stream = "payments", group = "ledger" }
    local function with(name, v)
      local t = { [name] = v }
      for k, x in pairs(L) do t[k] = x end
      return t
    end
    for _, o in ipairs { "ack", "retry", "retry_after", "reply", "reject", "error", "invalid", "dead_letter" } do
      assert.equal(0, value(page, "luastream_deliveries_total", with("outcome", o)), o)
    end
    for _, r in ipairs { "handler-error", "bad-return", "rejected", "max-deliveries", "decode-error",
      "too-large", "no-fields", "number-out-of-range", "duplicate-data", "memory", "schema" } do
      assert.equal(0, value(page, "luastream_dead_letters_total", with("reason", r)), r)
    end
    -- a handler without dead_letter writes none: no series
    assert.is_nil(value(page, "luastream_dead_letters_total", { handler = "plain" }), body)
    assert.equal(0, value(page, "luastream_deliveries_total", { handler = "plain", outcome = "error" }))
    for _, k in ipairs { "connection_lost", "connect_failed", "denied", "timeout", "error_reply" } do
      assert.equal(0, value(page, "luastream_redis_errors_total", { kind = k }), k)
    end
    assert.equal(0, value(page, "luastream_redis_reconnects_total"))
    assert.equal(0, value(page, "luastream_handler_duration_seconds", L, "luastream_handler_duration_seconds_count"))
    assert.equal(0, host:stop())
  end)

  it("counts what the spec made happen, in a page a strict reader accepts", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["post.lua"] = HANDLER })
    local host = helper.host_start({ "--http", "127.0.0.1:0" }, { server = srv, dir = dir })
    host:wait_log(READY, 20, { plain = true })
    local port = helper.health_port(host)

    local cmds = {}
    for i = 1, 500 do
      cmds[#cmds + 1] = { "XADD", "payments", "*", "data", string.format('{"op":"ok","id":%d}', i) }
    end
    for _, op in ipairs { "reject", "fail", "retry", "later", "sleep", "much_later" } do
      cmds[#cmds + 1] = { "XADD", "payments", "*", "data", string.format('{"op":"%s"}', op) }
    end
    cmds[#cmds + 1] = { "XADD", "payments", "*", "data", "{not json" }
    srv:pipe(cmds)

    local L = { handler = "post", stream = "payments", group = "ledger" }
    local function outcome(o)
      return { handler = "post", stream = "payments", group = "ledger", outcome = o }
    end
    local page
    helper.wait_until(function()
      page = scrape(port)
      -- the retried entry reaches max_deliveries: 3 deliveries, the last dead-lettered
      return (value(page, "luastream_deliveries_total", outcome("dead_letter")) or 0) >= 1
        and (value(page, "luastream_deliveries_total", outcome("ack")) or 0) >= 502
    end, 20, "the outcomes counted")
    assert.equal(502, value(page, "luastream_deliveries_total", outcome("ack"))) -- 500 + later + sleep
    assert.equal(1, value(page, "luastream_deliveries_total", outcome("reject")))
    assert.equal(1, value(page, "luastream_deliveries_total", outcome("invalid")))
    assert.equal(2, value(page, "luastream_deliveries_total", outcome("retry_after")))
    assert.equal(2, value(page, "luastream_deliveries_total", outcome("retry")))
    assert.equal(1, value(page, "luastream_deliveries_total", outcome("dead_letter")))
    assert.is_true(value(page, "luastream_deliveries_total", outcome("error")) >= 1)
    assert.is_nil(value(page, "luastream_deliveries_total", outcome("skipped")))
    assert.equal(0, value(page, "luastream_outcomes_skipped_total", L))
    local function reason(r)
      return { handler = "post", stream = "payments", group = "ledger", reason = r }
    end
    assert.equal(1, value(page, "luastream_dead_letters_total", reason("rejected")))
    assert.equal(1, value(page, "luastream_dead_letters_total", reason("decode-error")))
    assert.equal(1, value(page, "luastream_dead_letters_total", reason("max-deliveries")))
    assert.equal(2, value(page, "luastream_retries_scheduled_total", L))
    assert.equal(2, value(page, "luastream_delays_scheduled_total", L))
    assert.is_true(value(page, "luastream_entries_read_total", L) >= 507)
    assert.is_true(value(page, "luastream_reads_total", L) >= 1)
    -- every finished delivery is in the duration histogram; the one that slept 30 ms is above 25 ms
    local count = value(page, "luastream_handler_duration_seconds", L, "luastream_handler_duration_seconds_count")
    assert.is_true(count >= 508, "duration count " .. count)
    local le25 = value(page, "luastream_handler_duration_seconds",
      { handler = "post", stream = "payments", group = "ledger", le = "0.025" },
      "luastream_handler_duration_seconds_bucket")
    assert.is_true(le25 < count, "nothing counted above 25 ms")
    assert.equal(1, value(page, "luastream_redis_connected"))
    assert.equal(0, value(page, "luastream_redis_reconnects_total"))
    assert.equal(1, value(page, "luastream_handler_info", { handler = "post" }))
    assert.is_true(value(page, "process_resident_memory_bytes") > 1e6)
    assert.is_true(value(page, "process_open_fds") > 3)
    assert.is_true(math.abs(value(page, "process_start_time_seconds") - os.time()) < 120)
    assert.is_true(value(page, "process_cpu_seconds_total") > 0)

    -- what Redis knows of the group, asked when a scrape finds the last answers old
    local G = { stream = "payments", group = "ledger" }
    helper.wait_until(function()
      page = scrape(port)
      return value(page, "luastream_group_pending", G) == 1 -- the entry whose handler failed
        and value(page, "luastream_group_delayed_entries", G) == 1 -- the one an hour away
        and value(page, "luastream_dead_letter_stream_length", G) == 3
        and (value(page, "luastream_group_oldest_pending_idle_seconds", G) or 0) > 0
    end, 20, "the group's state")
    assert.equal(0, value(page, "luastream_group_lag", G))

    -- a reload: counted, and the info metric names the new version only
    local old_version = nil
    for _, s in ipairs(page.luastream_handler_info.samples) do old_version = s.labels.version end
    helper.write_file(dir .. "/post.lua", HANDLER .. "\n-- edited\n")
    host:wait_log('msg="handler reloaded"', 20, { plain = true })
    page = scrape(port)
    assert.equal(1, value(page, "luastream_reloads_total", { handler = "post", result = "ok" }))
    assert.equal(1, #page.luastream_handler_info.samples)
    assert.are_not.equal(old_version, page.luastream_handler_info.samples[1].labels.version)

    -- Redis restarted: the connection comes back, counted
    srv:restart()
    helper.wait_until(function()
      page = scrape(port)
      return value(page, "luastream_redis_reconnects_total") == 1
        and value(page, "luastream_redis_connected") == 1
    end, 30, "the reconnect counted")
    assert.is_true(value(page, "luastream_redis_errors_total", { kind = "connection_lost" }) >= 1)
    local rtt = value(page, "luastream_redis_command_duration_seconds", nil,
      "luastream_redis_command_duration_seconds_count")
    assert.is_true(rtt > 0, "no command timed")
    -- Prometheus' own linter accepts the page, and the documented alerts
    local _, body = scrape(port)
    local code, out = promtool({ "check", "metrics" }, body)
    assert.equal(0, code, out)
    code, out = promtool({ "check", "rules", helper.repo_root .. "/docs/monitoring/alerts.yml" })
    assert.equal(0, code, out)
    assert.equal(0, host:stop())
  end)
end)
