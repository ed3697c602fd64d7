-- webdriver: Debian's headless chromium driven through chromedriver's W3C
-- WebDriver HTTP API, for the specs of pages luastream serves.
--
--   local wd = require "tests.integration.support.webdriver"
--   local b = wd.start()                      -- skips when chromium is missing
--   b:get("http://127.0.0.1:" .. port .. "/")
--   b:wait_for("#overview tr.group-row")      -- the element, or an error at the deadline
--   b:wait_text("#updated", "ago")            -- a Lua pattern, or fn(text) -> true
--   b:type("input[name=token]", "secret"); b:click("button[type=submit]")
--
-- Each browser is its own chromedriver (/usr/bin/chromedriver --port=N on a
-- free loopback port) and chromium (/usr/bin/chromium --headless=new, a fresh
-- profile in a temp folder). Requests go through the curl command line, JSON
-- through lua-cjson. A WebDriver error is raised as a Lua error carrying the
-- request and chromedriver's error code and message.
--
-- Lifetime: wd.start() registers the browser for helper.cleanup(), like the
-- other servers of the specs. wd.start { keep = true } is not registered: one
-- browser for a whole spec file, started in setup() and closed with b:close()
-- in teardown() (helper.cleanup() in after_each leaves it alone; b:reset()
-- between tests forgets cookies and the page). chromedriver runs under
-- `setpriv --pdeathsig KILL` and chromium under a wrapper doing the same, so
-- neither outlives busted if it is killed.
--
-- Nothing here sleeps for a fixed time: the wait_* functions poll a condition
-- every ~20 ms until a deadline.
local cjson = require "cjson"
local sys = require "tests.integration.support.sys"
local files = require "tests.integration.support.files"
local processes = require "tests.integration.support.processes"
local ports = require "tests.integration.support.ports"
local registry = require "tests.integration.support.registry"

local wd = {}

wd.CHROMIUM = "/usr/bin/chromium"
wd.CHROMEDRIVER = "/usr/bin/chromedriver"
wd.ARGS = { "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900" }
wd.TIMEOUT_S = 10 -- the default deadline of the wait_* functions

-- The W3C key of an element reference in JSON.
local ELEMENT = "element-6066-11e4-a52e-4f735466cecf"

local null = cjson.null

--[[ Returns when chromium and chromedriver are installed. Otherwise it writes
why to stderr and marks the test pending (busted's skip), as redis's
require_server does; with LUASTREAM_REQUIRE_REDIS set (./dev test, where every
test must run) it is an error instead. ]]
function wd.require_browser()
  local missing = {}
  for _, p in ipairs { { wd.CHROMIUM, "chromium" }, { wd.CHROMEDRIVER, "chromium-driver" } } do
    if sys.C.access(p[1], 1) ~= 0 then missing[#missing + 1] = p[1] .. " (package " .. p[2] .. ")" end
  end
  if #missing == 0 then return end
  local why = "not installed: " .. table.concat(missing, ", ")
    .. ": this test drives a headless browser (install them, e.g. apt-get install chromium chromium-driver)"
  sys.skip_missing(why)
end

-- ---- base64 ----------------------------------------------------------------

local B64 = {}
do
  local alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
  for i = 1, 64 do B64[alphabet:byte(i)] = i - 1 end
end

--- Decodes standard base64 (padding optional, whitespace ignored); errors on
--- any other character.
function wd.base64_decode(s)
  s = s:gsub("%s", ""):gsub("=+$", "")
  local out, n = {}, 0
  local acc, bits = 0, 0
  for i = 1, #s do
    local v = B64[s:byte(i)]
    if not v then error("not base64: character " .. i .. " is " .. string.format("%q", s:sub(i, i)), 2) end
    acc, bits = acc * 64 + v, bits + 6
    if bits >= 8 then
      bits = bits - 8
      local byte = math.floor(acc / 2 ^ bits)
      acc = acc - byte * 2 ^ bits
      n = n + 1
      out[n] = string.char(byte)
    end
  end
  return table.concat(out)
end

-- ---- the HTTP exchange with chromedriver -----------------------------------

local Browser = {}
Browser.__index = Browser
wd.Browser = Browser

local Element = {}
Element.__index = Element
wd.Element = Element

-- What a request's error says: METHOD path: error (message's first lines).
local function describe_error(method, path, status, body)
  local ok, doc = pcall(cjson.decode, body)
  local v = ok and type(doc) == "table" and doc.value
  if type(v) == "table" and v.error then
    local msg = tostring(v.message or "")
    -- chromedriver appends a "(Session info: ...)" line and a stack trace
    msg = msg:gsub("\n%s*%(Session info:.*$", "")
    return string.format("webdriver %s %s: %s: %s", method, path, v.error, msg)
  end
  return string.format("webdriver %s %s: HTTP %s: %s", method, path, tostring(status), files.tail(body, 5))
end

--[[ One request to chromedriver at base (http://127.0.0.1:PORT); body is a Lua
table sent as JSON, or a JSON text. Returns the decoded "value" (cjson.null for null);
raises the WebDriver error otherwise. ]]
local function request(base, method, path, body, timeout_s)
  timeout_s = timeout_s or 60
  local argv = { "curl", "-sS", "--noproxy", "*", "--max-time", tostring(timeout_s), "-X", method,
    "-w", "\n%{http_code}" }
  local opts = { timeout = timeout_s + 10 }
  if body ~= nil then
    for _, a in ipairs { "-H", "Content-Type: application/json; charset=utf-8", "--data-binary", "@-" } do
      argv[#argv + 1] = a
    end
    opts.stdin = type(body) == "string" and body or cjson.encode(body)
  end
  argv[#argv + 1] = base .. path
  local code, out, err = processes.run(argv, opts)
  if code ~= 0 then
    error(string.format("webdriver %s %s: curl exited with %d: %s", method, path, code, files.trim(err)), 0)
  end
  local text, status = out:match("^(.*)\n(%d+)$")
  status = tonumber(status)
  if status ~= 200 then error(describe_error(method, path, status, text or out), 0) end
  local doc = cjson.decode(text)
  return doc.value
end

-- Replaces element references (anywhere in v) by Element objects, and null by nil.
function Browser:_wrap(v)
  if v == null then return nil end
  if type(v) ~= "table" then return v end
  if v[ELEMENT] then return setmetatable({ browser = self, id = v[ELEMENT] }, Element) end
  local out = {}
  for k, x in pairs(v) do out[k] = self:_wrap(x) end
  return out
end

-- Elements as W3C references (for exec's arguments).
local function unwrap(v)
  if type(v) ~= "table" then return v end
  if getmetatable(v) == Element then return { [ELEMENT] = v.id } end
  local out = {}
  for k, x in pairs(v) do out[k] = unwrap(x) end
  return out
end

--- A request in this browser's session: the decoded value.
function Browser:_session(method, path, body)
  if not self.session then error("webdriver: the browser is closed", 3) end
  return request(self.base, method, "/session/" .. self.session .. path, body)
end

-- ---- starting and stopping ---------------------------------------------------

-- A chromium that dies with its parent (chromedriver): the wrapper chromedriver starts.
local function write_wrapper(dir)
  local path = dir .. "/chromium"
  files.write_file(path, "#!/bin/sh\nexec setpriv --pdeathsig KILL -- " .. wd.CHROMIUM .. ' "$@"\n')
  os.execute("chmod 700 " .. files.shell_quote(path))
  return path
end

-- Starts chromedriver on a free port of dir's; returns the Proc and its base URL.
local function start_driver(dir)
  local last
  for _ = 1, 5 do
    local port = ports.free_port()
    local log = dir .. "/chromedriver.log"
    local proc = processes.spawn({ wd.CHROMEDRIVER, "--port=" .. port, "--allowed-ips=127.0.0.1" },
      { pdeathsig = true, stdout = log, stderr = "stdout" })
    local base = "http://127.0.0.1:" .. port
    local deadline = sys.now() + 20
    while sys.now() < deadline and proc:alive() do
      if ports.port_open(port) then
        local ok, v = pcall(request, base, "GET", "/status", nil, 5)
        if ok and type(v) == "table" and v.ready then return proc, base, log end
      end
      sys.pause(sys.POLL_MS)
    end
    last = string.format("chromedriver on port %d did not become ready (%s):\n%s", port,
      proc:alive() and "still running after 20 s" or ("exited with " .. tostring(proc.code)),
      files.tail(files.read_file(log), 15))
    proc:terminate(5)
  end
  error(last, 3)
end

--[[ Starts chromedriver and a headless chromium and opens a session.
opts: keep = true (not stopped by helper.cleanup(): close it yourself),
args = extra chromium switches (a list), log_level = the browser console
level b:logs() collects ("ALL" by default).
Returns a Browser; b.dir is its temp folder (profile, chromedriver.log). ]]
function wd.start(opts)
  opts = opts or {}
  wd.require_browser()
  -- kept: the folder lives as long as the browser, and b:close() removes it
  local dir = files.tmpdir("chromium", opts.keep)
  local args = { "--user-data-dir=" .. dir .. "/profile" }
  for _, a in ipairs(wd.ARGS) do args[#args + 1] = a end
  for _, a in ipairs(opts.args or {}) do args[#args + 1] = a end
  local proc, base, log = start_driver(dir)
  local b = setmetatable({ proc = proc, base = base, dir = dir, log_file = log, keep = opts.keep }, Browser)
  local ok, v = pcall(request, base, "POST", "/session", {
    capabilities = { alwaysMatch = {
      browserName = "chrome",
      ["goog:loggingPrefs"] = { browser = opts.log_level or "ALL" },
      ["goog:chromeOptions"] = { binary = write_wrapper(dir), args = args },
    } },
  })
  if not ok then
    b:close()
    error(string.format("%s\nchromedriver's log (%s):\n%s", v, log, files.tail(files.read_file(log), 15)), 2)
  end
  b.session = v.sessionId
  b.chromium_pid = v.capabilities and tonumber(v.capabilities["goog:processID"])
  if not opts.keep then registry.servers[#registry.servers + 1] = b end
  return b
end
wd.browser_start = wd.start

--[[ Ends the session (chromium exits), stops chromedriver, kills a chromium
still left, and removes the temp folder (kept with LUASTREAM_KEEP_TMP=1).
Safe to call more than once. ]]
function Browser:close()
  if self.session then
    pcall(request, self.base, "DELETE", "/session/" .. self.session, nil, 15)
    self.session = nil
  end
  if self.proc then
    self.proc:terminate(5)
    self.proc = nil
  end
  local pid = self.chromium_pid
  if pid and processes.proc_state(pid) then
    -- the session's end did not stop it: a last resort, our own child's pid
    sys.C.kill(pid, sys.SIGNALS.KILL)
  end
  self.chromium_pid = nil
  if self.keep and self.dir and os.getenv("LUASTREAM_KEEP_TMP") ~= "1" then
    os.execute("rm -rf " .. files.shell_quote(self.dir))
  end
end
Browser.stop = Browser.close -- what helper.cleanup() calls

--- Forgets the browser's state between tests: about:blank, no cookies (of any
--- site), the console log drained.
function Browser:reset()
  self:get("about:blank")
  self:_session("POST", "/goog/cdp/execute", { cmd = "Network.clearBrowserCookies", params = {} })
  self:logs()
end

-- ---- navigation --------------------------------------------------------------

--- Loads url and waits until the page has loaded (document.readyState complete).
function Browser:get(url) self:_session("POST", "/url", { url = url }) end

--- The current page's URL.
function Browser:url() return self:_session("GET", "/url") end

--- The current page's title.
function Browser:title() return self:_session("GET", "/title") end

--- Reloads the page.
function Browser:refresh() self:_session("POST", "/refresh", {}) end

--- Goes back one page in the history.
function Browser:back() self:_session("POST", "/back", {}) end

-- ---- elements ------------------------------------------------------------------

--- The first element matching the CSS selector, or nil (no waiting).
function Browser:find(css)
  local ok, v = pcall(self._session, self, "POST", "/element", { using = "css selector", value = css })
  if ok then return self:_wrap(v) end
  if tostring(v):find(": no such element:", 1, true) then return nil end
  error(v, 2)
end

--- Every element matching the CSS selector, in document order (maybe none).
function Browser:find_all(css)
  return self:_wrap(self:_session("POST", "/elements", { using = "css selector", value = css }))
end

-- An element: el itself, or the first match of the selector (an error if none).
function Browser:_element(el, level)
  if type(el) == "table" then return el end
  local found = self:find(el)
  if not found then
    error(string.format("no element matches %q on %s", el, self:url()), (level or 2) + 1)
  end
  return found
end

--[[ Waits until an element matches the CSS selector; returns it. Errors after
timeout_s (default wd.TIMEOUT_S) naming the selector and the page. ]]
function Browser:wait_for(css, timeout_s)
  timeout_s = timeout_s or wd.TIMEOUT_S
  local deadline = sys.now() + timeout_s
  while true do
    local el = self:find(css)
    if el then return el end
    if sys.now() >= deadline then
      error(string.format("timed out after %ss waiting for an element matching %q on %s",
        timeout_s, css, self:url()), 2)
    end
    sys.pause(sys.POLL_MS)
  end
end

--[[ Waits until no element matches the CSS selector. Errors after timeout_s. ]]
function Browser:wait_gone(css, timeout_s)
  timeout_s = timeout_s or wd.TIMEOUT_S
  local deadline = sys.now() + timeout_s
  while self:find(css) do
    if sys.now() >= deadline then
      error(string.format("timed out after %ss waiting for no element to match %q on %s",
        timeout_s, css, self:url()), 2)
    end
    sys.pause(sys.POLL_MS)
  end
end

--[[ Waits until the text of the first element matching css satisfies want: a
Lua pattern (string.find) or a function(text) returning true. Returns the
text. Errors after timeout_s (default wd.TIMEOUT_S) with the last text seen
(or that nothing matched the selector). ]]
function Browser:wait_text(css, want, timeout_s)
  timeout_s = timeout_s or wd.TIMEOUT_S
  local test = want
  if type(want) == "string" then test = function(t) return t:find(want) ~= nil end end
  local deadline = sys.now() + timeout_s
  local last
  while true do
    local el = self:find(css)
    if el then
      -- the element may be replaced between find and text
      local ok, text = pcall(el.text, el)
      if ok then
        last = string.format("its text is %q", text)
        if test(text) then return text end
      end
    else
      last = "no element matches it"
    end
    if sys.now() >= deadline then
      error(string.format("timed out after %ss waiting for the text of %q to %s: %s (on %s)", timeout_s, css,
        type(want) == "string" and string.format("match %q", want) or "satisfy the condition", last,
        self:url()), 2)
    end
    sys.pause(sys.POLL_MS)
  end
end

--[[ Polls fn(browser) until it returns a true value (returned); errors after
timeout_s naming what (fn may return false, detail for the error). ]]
function Browser:wait_until(fn, timeout_s, what)
  return processes.wait_until(function() return fn(self) end, timeout_s or wd.TIMEOUT_S, what)
end

--- Clicks the element (an Element or the first match of a CSS selector).
function Browser:click(el) self:_element(el):click() end

--- Types text into the element (appended to what it holds; see clear).
function Browser:type(el, text) self:_element(el):type(text) end

--- Empties an input or textarea.
function Browser:clear(el) self:_element(el):clear() end

--- The element's rendered text (what a user sees; "" when hidden).
--- For a selector, a page that re-renders between finding the element and
--- reading it (a refresh) is read again: a few tries, then the error.
function Browser:_fresh(read)
  for _ = 1, 5 do
    local ok, v = pcall(read)
    if ok then return v end
    if not tostring(v):find("stale element", 1, true) then error(v, 0) end
  end
  return read()
end

function Browser:text(el)
  if type(el) ~= "string" then return self:_element(el):text() end
  return self:_fresh(function() return self:_element(el):text() end)
end

--- The rendered text of every match of the CSS selector, in document order.
function Browser:texts(css)
  return self:_fresh(function()
    local out = {}
    for i, el in ipairs(self:find_all(css)) do out[i] = el:text() end
    return out
  end)
end

--- The element's attribute as the markup (or setAttribute) set it, or nil.
function Browser:attr(el, name) return self:_element(el):attr(name) end

--- The element's DOM property (JSON values; nil for undefined or null):
--- prop(css, "value") is what an input holds now, "checked" a checkbox's state.
function Browser:prop(el, name) return self:_element(el):prop(name) end

function Element:_call(method, what, body)
  return self.browser:_wrap(self.browser:_session(method, "/element/" .. self.id .. what, body))
end

function Element:click() self:_call("POST", "/click", {}) end
function Element:type(text) self:_call("POST", "/value", { text = tostring(text) }) end
function Element:clear() self:_call("POST", "/clear", {}) end
function Element:text() return self:_call("GET", "/text") end
function Element:attr(name) return self:_call("GET", "/attribute/" .. name) end
function Element:prop(name) return self:_call("GET", "/property/" .. name) end
--- The element's tag name, lower case.
function Element:tag() return self:_call("GET", "/name") end
function Element:displayed() return self:_call("GET", "/displayed") end
function Element:enabled() return self:_call("GET", "/enabled") end
function Element:selected() return self:_call("GET", "/selected") end

-- ---- scripts, cookies, screenshots, console ------------------------------------

--[[ Runs js as the body of a function (use `return`; its arguments are
`arguments[0]`, ...) in the page and returns its value: JSON values as Lua
values (null and undefined as nil), DOM elements as Elements. Elements can be
passed as arguments. A script error is raised with the browser's message. ]]
function Browser:exec(js, ...)
  local args = {}
  for i = 1, select("#", ...) do args[i] = unwrap((select(i, ...))) end
  -- lua-cjson 2.1.0 writes an empty table as {}: WebDriver wants a list
  local body = string.format('{"script":%s,"args":%s}', cjson.encode(js), #args == 0 and "[]" or cjson.encode(args))
  return self:_wrap(self:_session("POST", "/execute/sync", body))
end

--[[ The cookies the page's document can see and send (HttpOnly ones
included): a list of {name, value, path, domain, secure, httpOnly, sameSite,
expiry}. ]]
function Browser:cookies() return self:_wrap(self:_session("GET", "/cookie")) end

--- The cookie named name (see cookies), or nil.
function Browser:cookie(name)
  for _, c in ipairs(self:cookies()) do
    if c.name == name then return c end
  end
  return nil
end

--- Writes a PNG of the viewport to path; returns path.
function Browser:screenshot(path)
  local png = wd.base64_decode(self:_session("GET", "/screenshot"))
  files.write_file(path, png)
  return path
end

--[[ The browser console's entries since the last call (chromedriver's log of
type "browser": console.* calls, uncaught errors, failed loads): a list of
{level = "INFO"|"WARNING"|"SEVERE"|..., message, timestamp}. ]]
function Browser:logs() return self:_wrap(self:_session("POST", "/se/log", { type = "browser" })) end

return wd
