-- The specs' WebDriver client (support/webdriver.lua) against a page of its
-- own served by Python's http.server, without luastream: the browser runs the
-- page's script, and the client's waits, errors, screenshots, cookies and
-- console log work as the console's specs rely on.
local helper = require "tests.integration.helper"
local wd = require "tests.integration.support.webdriver"
local files = require "tests.integration.support.files"
local ports = require "tests.integration.support.ports"
local processes = require "tests.integration.support.processes"
local sys = require "tests.integration.support.sys"

local PAGE = [[<!doctype html>
<html><head><meta charset="utf-8"><title>webdriver self-test</title>
<script src="page.js" defer></script></head>
<body>
<input id="name"><button id="greet">Greet</button>
<p id="out">nobody</p>
<ul><li class="item">one</li><li class="item">two</li><li class="item" hidden>three</li></ul>
<a id="link" href="#/x" data-kind="plain">a link</a>
</body></html>
]]

-- The answer comes a little later, as a fetch's would: wait_text has to wait.
local SCRIPT = [[
document.cookie = "seen=1; path=/";
document.getElementById("greet").addEventListener("click", function () {
  var name = document.getElementById("name").value;
  setTimeout(function () {
    document.getElementById("out").textContent = "hello, " + name;
    console.log("greeted " + name);
  }, 150);
});
]]

-- One page server and one browser for the file: started by the first test
-- that needs them, stopped in teardown. helper.cleanup() runs after each test
-- and must leave both alone.
local site, browser

local function start_site()
  local dir = files.tmpdir("webdriver-site", true)
  files.write_file(dir .. "/index.html", PAGE)
  files.write_file(dir .. "/page.js", SCRIPT)
  for _ = 1, 5 do
    local port = ports.free_port()
    local proc = processes.spawn({ "/usr/bin/python3", "-m", "http.server", port, "--bind", "127.0.0.1",
      "--directory", dir }, { pdeathsig = true, stdout = dir .. "/server.log", stderr = "stdout" })
    local up = processes.wait_until(function()
      return ports.port_open(port) or not proc:alive() and "exited"
    end, 15, "python3 -m http.server on port " .. port)
    if up == true then return { proc = proc, dir = dir, url = "http://127.0.0.1:" .. port } end
    proc:wait(5)
  end
  error("cannot start python3 -m http.server")
end

local function open_page()
  wd.require_browser()
  site = site or start_site()
  browser = browser or wd.start { keep = true }
  browser:reset()
  browser:get(site.url .. "/index.html")
  return browser
end

describe("the WebDriver client", function()
  after_each(helper.cleanup)

  teardown(function()
    if browser then browser:close() end
    if site then
      site.proc:terminate(5)
      os.execute("rm -rf " .. files.shell_quote(site.dir))
    end
  end)

  it("types into a field and clicks a button, and the page's script changes a text", function()
    local b = open_page()
    assert.are.equal("webdriver self-test", b:title())
    assert.are.equal(site.url .. "/index.html", b:url())
    assert.are.equal("nobody", b:text("#out"))
    b:type("#name", "Ada")
    assert.are.equal("Ada", b:prop("#name", "value"))
    assert.is_nil(b:attr("#name", "value")) -- the markup has none
    b:click("#greet")
    assert.are.equal("hello, Ada", b:wait_text("#out", "^hello, "))
    b:clear("#name")
    b:type("#name", "Grace")
    b:click("#greet")
    assert.are.equal("hello, Grace", b:wait_text("#out", function(t) return t == "hello, Grace" end))
  end)

  it("finds elements, reads texts and attributes, and returns what a script returns", function()
    local b = open_page()
    assert.is_nil(b:find("#missing"))
    assert.are.same({ "one", "two", "" }, b:texts("li.item")) -- rendered text: the hidden one is ""
    assert.are.same({}, b:texts("li.none"))
    assert.are.equal("plain", b:attr("#link", "data-kind"))
    assert.is_nil(b:attr("#link", "data-none"))
    assert.are.equal("a", b:wait_for("#link"):tag())

    assert.are.equal(42, b:exec("return 40 + 2"))
    assert.are.equal("ab", b:exec("return arguments[0] + arguments[1]", "a", "b"))
    assert.are.same({ n = 3, list = { 1, "x", true } }, b:exec("return {n: 3, list: [1, 'x', true]}"))
    assert.is_nil(b:exec("return null"))
    assert.is_nil(b:exec("document.title = 'changed'"))
    assert.are.equal("changed", b:title())
    -- an element comes back as one, and goes to a script as one
    local el = b:exec("return document.querySelector('#out')")
    assert.are.equal("nobody", el:text())
    assert.are.equal("P", b:exec("return arguments[0].tagName", el))
  end)

  it("times out with a message saying what it waited for and what it saw", function()
    local b = open_page()
    local t0 = sys.now()
    local ok, err = pcall(b.wait_text, b, "#out", "^hello", 0.3)
    assert.is_false(ok)
    assert.is_true(sys.now() - t0 >= 0.3)
    assert.matches('timed out after 0.3s waiting for the text of "#out" to match "^hello": its text is "nobody"', err, 1, true)
    ok, err = pcall(b.wait_text, b, "#nothing", "x", 0.2)
    assert.is_false(ok)
    assert.matches('"#nothing" to match "x": no element matches it', err, 1, true)
    ok, err = pcall(b.wait_for, b, "#nothing", 0.2)
    assert.is_false(ok)
    assert.matches('timed out after 0.2s waiting for an element matching "#nothing" on ' .. site.url, err, 1, true)
    ok, err = pcall(b.click, b, "#nothing")
    assert.is_false(ok)
    assert.matches('no element matches "#nothing"', err, 1, true)
  end)

  it("raises chromedriver's errors with their WebDriver error code and message", function()
    local b = open_page()
    local ok, err = pcall(b.exec, b, "throw new Error('boom in the page')")
    assert.is_false(ok)
    assert.matches("webdriver POST /session/%S+/execute/sync: javascript error: .*boom in the page", err)
    ok, err = pcall(b.find, b, "p[")
    assert.is_false(ok)
    assert.matches("invalid selector", err, 1, true)
  end)

  it("writes a PNG screenshot", function()
    local b = open_page()
    local path = b.dir .. "/shot.png"
    assert.are.equal(path, b:screenshot(path))
    local png = files.read_file(path)
    assert.are.equal("\137PNG\r\n\26\n", png:sub(1, 8))
    -- the IHDR chunk: 1280 wide, as --window-size says
    local w = png:byte(17) * 2 ^ 24 + png:byte(18) * 2 ^ 16 + png:byte(19) * 2 ^ 8 + png:byte(20)
    assert.are.equal(1280, w)
  end)

  it("reads the page's cookies and the browser console, and reset forgets the cookies", function()
    local b = open_page()
    assert.are.equal("1", b:wait_until(function() return b:cookie("seen") end, 5, "the cookie").value)
    b:type("#name", "Ada")
    b:click("#greet")
    local seen = {}
    b:wait_until(function()
      for _, e in ipairs(b:logs()) do
        seen[#seen + 1] = e.message
        if e.message:find("greeted Ada", 1, true) then return e end
      end
      return false, table.concat(seen, " | ")
    end, 5, "the console line")
    b:reset()
    b:get(site.url .. "/none.js") -- a page of the site without the script
    assert.are.same({}, b:cookies())
  end)

  it("is stopped by helper.cleanup() unless kept, chromium included", function()
    open_page() -- the kept browser, checked below to survive
    local b = wd.start()
    b:get("data:text/html,<p id=x>data url</p>")
    assert.are.equal("data url", b:text("#x"))
    local driver, pid = b.proc, b.chromium_pid
    assert.is_truthy(pid)
    helper.cleanup()
    assert.is_false(driver:alive())
    processes.wait_until(function()
      local state = processes.proc_state(pid)
      return state == nil or state == "Z"
    end, 10, "chromium " .. pid .. " to end")
    -- the kept one still works
    browser:type("#name", "x")
    browser:click("#greet")
    assert.are.equal("hello, x", browser:wait_text("#out", "^hello"))
  end)
end)
