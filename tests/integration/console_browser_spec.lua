-- The web console in a real browser: `luastream run --console` against a real
-- redis-server, driven through headless chromium (support/webdriver.lua).
-- Logging in through the login page (an HttpOnly session cookie), the
-- overview's numbers against XINFO, hostile entry bodies and dead-letter
-- errors shown as text, filtering dead letters by reason, replaying one from
-- the page, requests without a session and POSTs from another origin
-- refused, the overview following new entries, the Handlers page and its
-- Reload, and (with LUASTREAM_CONSOLE_SCREENSHOTS=1) the screenshots of
-- docs/operations.md (docs/images/console-*.png).
-- After the flows that should run clean, the browser's console holds no error.
local helper = require "tests.integration.helper"
local wd = require "tests.integration.support.webdriver"
local files = require "tests.integration.support.files"
local ports = require "tests.integration.support.ports"
local processes = require "tests.integration.support.processes"
local registry = require "tests.integration.support.registry"
local cjson = require "cjson"
local ffi = require "ffi"

pcall(ffi.cdef, "int chmod(const char *path, unsigned int mode);")

local READY = 'msg="host ready"'

-- Rejects bodies asking for it (with their reason) and payments of closed
-- accounts until the key `reopened` is set; posts the others to the set
-- `posted`. Bodies that are not JSON never reach it (decode-error).
local PAYMENTS = [[
local ls = require "luastream"
return {
  stream = "payments", group = "ledger", dead_letter = "payments.dead",
  handle = function(p, ctx)
    if p.reject then return ls.reject(p.reject) end
    if p.account == "closed" and not ls.redis.call("GET", "reopened") then
      return ls.reject("account closed")
    end
    ls.redis.call("SADD", "posted", tostring(p.id))
  end,
}
]]

-- Only takes back entries pending for a minute: new entries stay unread, so
-- the group's lag and length stay what the spec made them.
local AUDIT = [[
return {
  stream = "audit", group = "archive", read = "reclaim", min_idle = "1m",
  handle = function() end,
}
]]

local HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script>'

-- One browser for the file (started by the first test, closed in teardown).
local browser

local function open_browser()
  wd.require_browser()
  browser = browser or wd.start { keep = true }
  browser:reset()
  return browser
end

local function random_hex(n)
  local f = assert(io.open("/dev/urandom", "rb"))
  local bytes = f:read(n)
  f:close()
  return (bytes:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end

--[[ A redis-server and a host running PAYMENTS and AUDIT with the console on
a free port (refreshing every second), with: payments a closed account's
payment (rejected), a body that is not JSON (decode-error) and a payment
posted; audit 3 entries, one of them read by a consumer `manual` (pending,
never acked). args: more arguments of `luastream run`. Returns {srv, host, dir, port, url, token, dl = {rejected =,
["decode-error"] = } (dead-letter ids)}. ]]
local function start_console(args)
  local srv = helper.redis_start()
  local dir = helper.handlers_dir { ["payments.lua"] = PAYMENTS, ["audit.lua"] = AUDIT }
  local tokens = helper.tmpdir("console-tokens") .. "/tokens"
  local token = random_hex(16)
  files.write_file(tokens, "alice " .. token .. "\n")
  assert(ffi.C.chmod(tokens, tonumber("600", 8)) == 0)
  local argv = { "--console", "127.0.0.1:0", "--console-tokens", tokens, "--console-interval", "1s" }
  for _, a in ipairs(args or {}) do argv[#argv + 1] = a end
  local host = helper.host_start(argv, { server = srv, dir = dir })
  host:wait_log(READY, 20, { plain = true })
  local port = tonumber(host:wait_records({ msg = "console listening" }, 1, 10)[1].port)
  local c = { srv = srv, host = host, dir = dir, port = port, url = "http://127.0.0.1:" .. port, token = token }

  local rejected = helper.publish(srv, "payments", '{"id":1,"account":"closed","amount_cents":700}')
  local bad = srv:cli("XADD", "payments", "*", "data", "{not json")
  helper.publish(srv, "payments", '{"id":2,"account":"acme","amount_cents":800}')
  for i = 1, 3 do srv:cli("XADD", "audit", "*", "data", '{"n":' .. i .. "}") end
  srv:cli("XREADGROUP", "GROUP", "archive", "manual", "COUNT", "1", "STREAMS", "audit", ">")
  helper.wait_until(function()
    return srv:xlen("payments.dead") == 2 and srv:cli("SISMEMBER", "posted", "2") == "1"
  end, 10, "two dead letters and payment 2 posted")
  c.dl = {}
  for _, e in ipairs(srv:xrange("payments.dead")) do
    local origin = e.fields["dead-letter-id"]
    if origin == rejected then c.dl.rejected = e.id end
    if origin == bad then c.dl["decode-error"] = e.id end
  end
  assert(c.dl.rejected and c.dl["decode-error"], "the dead letters name their entries")
  return c
end

-- Logs in through the login page and waits for the overview's table.
local function login(b, c)
  b:get(c.url .. "/login")
  b:type("input[name=token]", c.token)
  b:click("button[type=submit]")
  b:wait_for("#overview tr.group-row")
end

local function row(stream, group)
  return string.format('#overview tr.group-row[data-stream="%s"][data-group="%s"]', stream, group)
end

local function equals(want)
  return function(t) return t == tostring(want) end
end

-- The browser console's errors since the last look: none at SEVERE, and no
-- CSP violation at any level.
local function assert_console_clean(b)
  local bad = {}
  for _, e in ipairs(b:logs()) do
    if e.level == "SEVERE" or tostring(e.message):find("Content Security Policy", 1, true) then
      bad[#bad + 1] = e.level .. ": " .. tostring(e.message)
    end
  end
  assert.same({}, bad, "the browser's console")
end

-- python3 -m http.server on a free port serving {name = text} from a temp folder.
local function start_site(pages)
  local dir = helper.tmpdir("console-other-site")
  for name, text in pairs(pages) do files.write_file(dir .. "/" .. name, text) end
  for _ = 1, 5 do
    local port = ports.free_port()
    local proc = helper.spawn({ "/usr/bin/python3", "-m", "http.server", port, "--bind", "127.0.0.1",
      "--directory", dir }, { pdeathsig = true, stdout = dir .. "/server.log", stderr = "stdout" })
    local up = processes.wait_until(function()
      return ports.port_open(port) or not proc:alive() and "exited"
    end, 15, "python3 -m http.server on port " .. port)
    if up == true then
      registry.procs[#registry.procs + 1] = proc -- helper.cleanup() stops it
      return "http://127.0.0.1:" .. port
    end
    proc:wait(5)
  end
  error("cannot start python3 -m http.server")
end

describe("the web console in a browser", function()
  after_each(helper.cleanup)

  teardown(function()
    if browser then browser:close() end
  end)

  it("logs in with the token through the login page, with an HttpOnly session cookie", function()
    local b = open_browser()
    local c = start_console()
    b:get(c.url .. "/login")
    b:type("input[name=token]", c.token:reverse())
    b:click("button[type=submit]")
    b:wait_text("#login-error", "wrong token")
    assert.is_nil(b:cookie("luastream_session"), "no session for a wrong token")
    b:logs() -- the refused login's page answers 401: that error is expected

    b:clear("input[name=token]")
    login(b, c)
    assert.matches("/#?/?$", b:url())
    b:wait_text("#who", "alice")
    local cookie = b:cookie("luastream_session")
    assert.is_table(cookie, "the session cookie")
    assert.is_true(cookie.httpOnly, "HttpOnly")
    assert.equal("Strict", cookie.sameSite)
    assert.is_nil(b:exec("return document.cookie.match(/luastream_session/)"), "scripts cannot read the session")
    assert.equal(1, c.host:count({ msg = "console login", who = "alice" }))
    assert_console_clean(b)
  end)

  it("shows each group's length, lag and pending as XINFO GROUPS and XLEN have them", function()
    local b = open_browser()
    local c = start_console()
    login(b, c)
    for _, sg in ipairs { { "payments", "ledger" }, { "audit", "archive" } } do
      local g = assert(c.srv:group(sg[1], sg[2]), sg[1] .. " " .. sg[2])
      local want = { length = c.srv:xlen(sg[1]), lag = g.lag, pending = g.pending }
      for cell, n in pairs(want) do
        b:wait_text(row(sg[1], sg[2]) .. " td." .. cell, equals(n))
      end
    end
    -- the numbers differ between the groups: a page showing one group's
    -- numbers on every row would not pass
    assert.equal("3", b:text(row("audit", "archive") .. " td.length"))
    assert.equal("2", b:text(row("audit", "archive") .. " td.lag"))
    assert.equal("1", b:text(row("audit", "archive") .. " td.pending"))
    assert.equal("0", b:text(row("payments", "ledger") .. " td.lag"))
    local attention = table.concat(b:texts("#attention li"), "\n")
    assert.matches("payments.dead", attention, 1, true)
    assert_console_clean(b)
  end)

  it("shows a hostile entry body and a dead letter's hostile error as text", function()
    local b = open_browser()
    local c = start_console()
    local id = assert(c.srv:cli("XADD", "payments", "*", "data", HOSTILE .. "\27[31mred\27[0m"))
    local markup = '<b>closed</b><img src=x onerror="window.__pwned=2">'
    helper.publish(c.srv, "payments", '{"id":9,"reject":' .. cjson.encode(markup) .. "}")
    helper.wait_until(function() return c.srv:xlen("payments.dead") == 4 end, 10, "4 dead letters")
    login(b, c)

    b:get(c.url .. "/#/entry?key=payments&id=" .. id)
    local body = b:wait_text("#entry-body", "script")
    assert.matches(HOSTILE, body, 1, true)
    assert.matches("\\x1b[31mred\\x1b[0m", body, 1, true)
    assert.is_nil(b:exec("return window.__pwned"))
    assert.equal(0, #b:find_all("#main img, #main script"))

    b:get(c.url .. "/#/dead-letters?stream=payments.dead")
    local hit
    b:wait_until(function()
      for _, t in ipairs(b:texts("tr.dl-row")) do
        if t:find(markup, 1, true) then hit = t end
      end
      return hit ~= nil
    end, 10, "a dead-letter row showing the markup of its error")
    assert.matches("rejected", hit, 1, true)
    assert.is_nil(b:exec("return window.__pwned"))
    assert.equal(0, #b:find_all("#main img, #main script, #main b"))
    assert_console_clean(b)
  end)

  it("filters dead letters by reason", function()
    local b = open_browser()
    local c = start_console()
    login(b, c)
    b:get(c.url .. "/#/dead-letters?stream=payments.dead")
    b:wait_until(function() return #b:find_all("tr.dl-row") == 2 end, 10, "both dead letters listed")
    b:type("#dl-filter-reason", "decode-error")
    b:click("#dl-apply")
    b:wait_until(function()
      local rows = b:find_all("tr.dl-row")
      return #rows == 1 and rows[1]:attr("data-id") == c.dl["decode-error"]
    end, 10, "only the decode-error dead letter")
    assert.matches("reason=decode%-error", b:url())
    assert.matches("decode%-error", b:text("tr.dl-row"))

    b:clear("#dl-filter-reason")
    b:type("#dl-filter-reason", "rejected")
    b:click("#dl-apply")
    b:wait_until(function()
      local rows = b:find_all("tr.dl-row")
      return #rows == 1 and rows[1]:attr("data-id") == c.dl.rejected
    end, 10, "only the rejected dead letter")
    assert_console_clean(b)
  end)

  it("replays one dead letter from its row: the handler takes it from the retry stream", function()
    local b = open_browser()
    local c = start_console()
    login(b, c)
    b:get(c.url .. "/#/dead-letters?stream=payments.dead")
    local id = c.dl.rejected
    b:wait_for('tr.dl-row[data-id="' .. id .. '"]')
    c.srv:cli("SET", "reopened", "1")
    b:click('button.dl-replay[data-id="' .. id .. '"]')
    b:wait_for("#confirm-panel")
    assert.same({ id }, b:texts("#confirm-ids li"))
    b:click("#confirm-ok")
    b:wait_text("#action-result", "Replayed 1")
    assert.matches("payments:retry:ledger", b:text("#action-result"), 1, true)

    helper.wait_until(function() return c.srv:cli("SISMEMBER", "posted", "1") == "1" end, 10,
      "payment 1 posted from the retry stream")
    helper.wait_until(function()
      return #c.srv:pending_ids("payments:retry:ledger", "ledger") == 0
    end, 10, "the copy acknowledged")
    assert.same({}, c.srv:xrange("payments.dead", id, id), "the dead letter is gone")
    assert.equal(1, c.srv:xlen("payments.dead"), "the other dead letter stays")
    assert.equal(1, c.srv:call("XINFO", "STREAM", "payments:retry:ledger")["entries-added"])
    b:wait_gone('tr.dl-row[data-id="' .. id .. '"]')
    assert.equal(1, c.host:count({ msg = "console action", who = "alice", action = "replay", count = 1 }))
    assert_console_clean(b)
  end)

  it("pauses a group from its page and resumes it; the overview marks it", function()
    local b = open_browser()
    local c = start_console()
    login(b, c)
    b:get(c.url .. "/#/group?stream=payments&group=ledger")
    b:wait_text("#pause-state", "Running")
    b:type("#pause-for", "5m")
    b:type("#pause-reason", "carrier down")
    b:click("#pause-button")
    b:wait_text("#pause-result", "Paused payments ledger until ")
    b:wait_text("#pause-state", "paused by luastream console by alice")
    assert.equal("carrier down", c.srv:cli("HGET", "luastream:pause:{payments}:ledger", "reason"))
    local ttl = tonumber(c.srv:cli("PTTL", "luastream:pause:{payments}:ledger"))
    assert.truthy(ttl > 200000 and ttl <= 300000, ttl)
    b:get(c.url .. "/#/")
    b:wait_for(row("payments", "ledger") .. " .pause-badge")
    b:get(c.url .. "/#/group?stream=payments&group=ledger")
    b:wait_text("#pause-state", "carrier down")
    b:click("#resume-button")
    b:wait_text("#pause-result", "Resumed payments ledger")
    b:wait_text("#pause-state", "Running")
    assert.equal(0, c.srv:call("EXISTS", "luastream:pause:{payments}:ledger"))
    assert.equal(1, c.host:count({ msg = "console action", who = "alice", action = "pause", reason = "carrier down" }))
    assert.equal(1, c.host:count({ msg = "console action", who = "alice", action = "resume" }))
    assert_console_clean(b)
  end)

  it("refuses requests without a session", function()
    local b = open_browser()
    local c = start_console()
    b:get(c.url .. "/#/")
    -- (a redirect keeps the fragment: /login#/)
    b:wait_until(function()
      local url = b:url()
      return url:match("^[^#]*"):match("/login$") ~= nil, url
    end, 10, "the login page")
    b:wait_for("input[name=token]")
    b:exec([[
      window.__answers = {};
      fetch('/api/overview').then(function (r) { window.__answers.overview = r.status; });
      fetch('/api/dead-letters/replay', { method: 'POST',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded', 'X-CSRF-Token': 'x' },
        body: 'stream=payments.dead&id=' + arguments[0] })
        .then(function (r) { window.__answers.replay = r.status; });
    ]], c.dl.rejected)
    local answers = b:wait_until(function()
      local a = b:exec("return window.__answers")
      return a and a.overview and a.replay and a
    end, 10, "both answers")
    assert.equal(401, answers.overview)
    assert.is_true(answers.replay == 401 or answers.replay == 403, "replay answered " .. answers.replay)
    assert.equal(2, c.srv:xlen("payments.dead"))
  end)

  it("refuses a POST from another origin even with the session cookie", function()
    local b = open_browser()
    local c = start_console()
    local target = c.url .. "/api/dead-letters/delete"
    local site = start_site {
      ["fetch.html"] = '<!doctype html><html><head><script src="fetch.js"></script></head><body><p id="out">waiting</p></body></html>',
      ["fetch.js"] = string.format([[
window.addEventListener('DOMContentLoaded', function () {
  var out = document.getElementById('out');
  fetch(%q, { method: 'POST', credentials: 'include',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' }, body: 'stream=payments.dead&id=%s' })
    .then(function (r) { out.textContent = 'status ' + r.status; }, function (e) { out.textContent = 'failed ' + e; });
});
]], target, c.dl.rejected),
      ["form.html"] = string.format('<!doctype html><html><head><script src="form.js"></script></head><body>'
        .. '<form id="f" method="post" action="%s"><input name="stream" value="payments.dead">'
        .. '<input name="id" value="%s"></form></body></html>', target, c.dl.rejected),
      ["form.js"] = "window.addEventListener('DOMContentLoaded', function () { document.getElementById('f').submit(); });\n",
    }
    login(b, c)
    -- the other site is on 127.0.0.1 too, another port: same site, so the
    -- SameSite=Strict cookie goes along and only the Origin check refuses
    b:get(site .. "/fetch.html")
    b:wait_text("#out", "^[sf]")
    assert.equal(2, c.srv:xlen("payments.dead"), "the fetch deleted nothing")
    b:get(site .. "/form.html")
    b:wait_text("body", "another origin")
    assert.matches("^" .. c.url:gsub("%p", "%%%0"), b:url())
    assert.same(c.dl.rejected, c.srv:xrange("payments.dead", c.dl.rejected, c.dl.rejected)[1].id)
    assert.equal(2, c.srv:xlen("payments.dead"), "the form deleted nothing")
    assert.equal(0, c.host:count({ msg = "console action" }))
  end)

  it("follows new entries without a reload", function()
    local b = open_browser()
    local c = start_console()
    login(b, c)
    local length = row("audit", "archive") .. " td.length"
    b:wait_text(length, equals(3))
    local before = b:text("#updated")
    for i = 4, 5 do c.srv:cli("XADD", "audit", "*", "data", '{"n":' .. i .. "}") end
    b:wait_text(length, equals(5))
    b:wait_text(row("audit", "archive") .. " td.lag", equals(4))
    assert.are_not.equal(before, b:text("#updated"))
    assert.equal(5, c.srv:xlen("audit"))
    assert_console_clean(b)
  end)

  it("shows the handlers running and reloads a changed file from the Handlers page", function()
    local b = open_browser()
    local c = start_console { "--no-reload" } -- the page's reload, not the watcher's
    login(b, c)
    b:get(c.url .. "/#/handlers")
    local cell = 'tr.handler-row[data-file$="/payments.lua"] td.running'
    b:wait_text(cell, "^running$")
    b:wait_text('tr.handler-row[data-file$="/audit.lua"] td.running', "^running$")
    files.write_file(c.dir .. "/payments.lua", PAYMENTS .. "-- changed\n")
    b:click("#reload")
    b:wait_for("#confirm-panel")
    local ids = b:texts("#confirm-ids li")
    assert.equal(1, #ids, table.concat(ids, "\n"))
    assert.matches("payments.lua: changed", ids[1], 1, true)
    b:wait_text(cell, "the file changed since")
    b:click("#confirm-ok")
    b:wait_text("#action-result", "Reloaded")
    c.host:wait_log("console action: reloading every handler", 10, { plain = true })
    b:wait_text(cell, "^running$")
    assert_console_clean(b)
  end)

  -- Writes the pictures of docs/operations.md; run by hand, so that a test
  -- run never rewrites them:
  --   LUASTREAM_CONSOLE_SCREENSHOTS=1 luajit /usr/bin/busted tests/integration/console_browser_spec.lua
  local screenshots = os.getenv("LUASTREAM_CONSOLE_SCREENSHOTS") == "1" and it or function() end
  screenshots("takes the screenshots of docs/operations.md", function()
    local b = open_browser()
    local c = start_console()
    login(b, c)
    b:wait_until(function() return #b:find_all("#attention li") >= 2 end, 10, "two attention items")
    b:wait_text("#updated", "read from Redis")
    b:wait_text("#main", "Deliveries/s and mean handler latency over") -- the second refresh: rates show
    b:screenshot(files.repo_root .. "/docs/images/console-overview.png")
    b:get(c.url .. "/#/entry?key=payments.dead&id=" .. c.dl.rejected)
    b:wait_for("#entry-body")
    b:screenshot(files.repo_root .. "/docs/images/console-dead-letter.png")
    assert_console_clean(b)
  end)
end)
