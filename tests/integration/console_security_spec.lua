-- The web console's doors, over HTTP against the real binary and a real
-- redis-server: the tokens file it refuses to start with, logging in and out
-- (the session cookie's flags, a token never echoed), what needs a session or
-- a bearer token, CSRF and Origin checks on every POST, the Host header
-- (DNS rebinding), and the headers every answer carries (checked on each
-- answer by the client of support/console.lua).
local helper = require "tests.integration.helper"
local console = require "tests.integration.support.console"

local ALICE, BOB = console.ALICE, console.BOB

local HANDLER = [[return { stream = "orders", group = "ship", handle = function() end }]]

local function start(srv)
  return console.start({ server = srv, dir = helper.handlers_dir({ ["ship.lua"] = HANDLER }) })
end

describe("console tokens file", function()
  after_each(helper.cleanup)

  local function refused(tokens, ...)
    local code, out, err = helper.luastream("console", "--redis", "redis://127.0.0.1:1",
      "--console", "127.0.0.1:0", "--console-tokens", tokens, ...)
    return code, out .. err
  end

  it("is refused when its group or others may read it, naming the file and its mode", function()
    for _, mode in ipairs { "644", "640", "604", "660" } do
      local path = console.tokens_file(nil, mode)
      local code, out = refused(path, "orders")
      assert.equal(1, code, out)
      assert.matches(path, out, 1, true)
      assert.matches("(mode " .. mode .. ")", out, 1, true)
      assert.matches("chmod 600", out, 1, true)
    end
    -- and under run --console, before anything runs
    local path = console.tokens_file(nil, "644")
    local code, out, err = helper.luastream("run", "--redis", "redis://127.0.0.1:1", "--console", "127.0.0.1:0",
      "--console-tokens", path, helper.handlers_dir({ ["ship.lua"] = HANDLER }))
    assert.equal(1, code, out .. err)
    assert.matches(path .. " can be read or changed by every user (mode 644)", out .. err, 1, true)
  end)

  it("refuses a short token, a duplicate name and a duplicate token, naming the line", function()
    local path = console.tokens_file("# operators\nalice " .. ALICE .. "\n\nbob 0123456789abcdef0123456789abcde\n")
    local code, out = refused(path, "orders")
    assert.equal(1, code, out)
    assert.matches(path .. ":4: the token is too short", out, 1, true)
    assert.is_nil(out:find("0123456789abcdef", 1, true), "the refused token is echoed: " .. out)

    path = console.tokens_file("alice " .. ALICE .. "\nalice " .. BOB .. "\n")
    code, out = refused(path, "orders")
    assert.equal(1, code, out)
    assert.matches(path .. ":2: a name given twice", out, 1, true)
    assert.is_nil(out:find(BOB, 1, true), out)

    path = console.tokens_file("alice " .. ALICE .. "\nbob " .. ALICE .. "\n")
    code, out = refused(path, "orders")
    assert.equal(1, code, out)
    assert.matches(path .. ":2: a token given twice", out, 1, true)
    assert.is_nil(out:find(ALICE, 1, true), out)

    path = console.tokens_file("")
    code, out = refused(path, "orders")
    assert.equal(1, code, out)
    assert.matches("holds no token", out, 1, true)
  end)

  it("is required with --console, and --console with it: a usage error (2)", function()
    local dir = helper.handlers_dir({ ["ship.lua"] = HANDLER })
    local code, out, err = helper.luastream("run", "--redis", "redis://127.0.0.1:1", "--console", "127.0.0.1:0", dir)
    assert.equal(2, code, out .. err)
    assert.matches("--console-tokens", err, 1, true)
    code, out, err = helper.luastream("run", "--redis", "redis://127.0.0.1:1", "--console-tokens",
      console.tokens_file(), dir)
    assert.equal(2, code, out .. err)
    assert.matches("--console ADDR:PORT", err, 1, true)
    code, out, err = helper.luastream("console", "--redis", "redis://127.0.0.1:1", "orders")
    assert.equal(2, code, out .. err)
    assert.matches("--console ADDR:PORT and --console-tokens PATH", err, 1, true)
  end)
end)

describe("console login", function()
  after_each(helper.cleanup)

  it("sends pages to /login and API calls 401 without a session; a wrong bearer is 401", function()
    local srv = helper.redis_start()
    local h = start(srv)
    local c = console.client(h.port)
    for _, path in ipairs { "/", "/index.html", "/group" } do
      local res = c:get(path)
      assert.equal(303, res.status, path)
      assert.equal("/login", res.headers.location, path)
    end
    for _, path in ipairs { "/api/session", "/api/overview", "/api/handlers", "/api/pending?key=orders&group=ship" } do
      local res = c:get(path)
      assert.equal(401, res.status, path)
      assert.is_string(res.json.error, path)
    end
    local res = c:post("/api/reload", "", { origin = false })
    assert.equal(401, res.status)
    assert.is_string(res.json.error)
    res = c:get("/api/session", { bearer = ALICE:sub(1, -2) .. "0" })
    assert.equal(401, res.status)
    res = c:get("/api/session", { bearer = ALICE .. "0" })
    assert.equal(401, res.status)
    res = c:get("/api/session", { bearer = ALICE })
    assert.equal(200, res.status)
    assert.equal("alice", res.json.name)
    res = c:get("/api/session", { bearer = BOB })
    assert.equal("bob", res.json.name)
    -- the login page and the assets need nothing
    res = c:get("/login")
    assert.equal(200, res.status)
    assert.matches('name="token"', res.body, 1, true)
    for _, path in ipairs { "/assets/console.js", "/assets/console.css" } do
      assert.equal(200, c:get(path).status, path)
    end
  end)

  it("gives a HttpOnly, SameSite=Strict session for the right token; a wrong one goes to /login?failed=1", function()
    local srv = helper.redis_start()
    local h = start(srv)
    local c = console.client(h.port)
    local res = c:login(ALICE)
    assert.equal("/", res.headers.location)
    assert.matches("; HttpOnly", c.set_cookie, 1, true)
    assert.matches("; SameSite=Strict", c.set_cookie, 1, true)
    assert.matches("; Path=/", c.set_cookie, 1, true)
    local session = c:json("/api/session")
    assert.equal("alice", session.name)
    assert.matches("^%x+$", session.csrf)
    assert.is_true(#session.csrf >= 32)
    assert.is_true(session.reload)
    res = c:get("/")
    assert.equal(200, res.status)
    assert.matches("text/html", res.headers["content-type"], 1, true)
    h:wait_records({ msg = "console login", who = "alice" }, 1, 5, "the login logged")

    local other = console.client(h.port)
    res = other:post("/login", { { "token", BOB .. "x" } })
    assert.equal(303, res.status)
    assert.equal("/login?failed=1", res.headers.location)
    assert.is_nil(res.headers["set-cookie"])
    res = other:post("/login", { { "token", "" } })
    assert.equal("/login?failed=1", res.headers.location)
    res = other:post("/login", "")
    assert.equal("/login?failed=1", res.headers.location)
    res = other:get("/login?failed=1")
    assert.matches('<p id="login%-error"[^>]*>wrong token</p>', res.body)
    assert.is_nil(c:get("/login").body:find("wrong token", 1, true), "the plain login page says wrong token")
    h:wait_records({ msg = "console login refused: wrong token" }, 3, 5, "the refused logins logged")

    -- the tokens appear in no answer and nowhere in the log
    for _, client in ipairs { c, other } do
      for _, r in ipairs(client.seen) do
        assert.is_nil((r.headers.location or ""):find(ALICE:sub(1, 12), 1, true), r.text)
        assert.is_nil((r.headers.location or ""):find(BOB:sub(1, 12), 1, true), r.text)
      end
      local all = client:everything_seen()
      assert.is_nil(all:find(ALICE, 1, true), "alice's token in an answer")
      assert.is_nil(all:find(BOB, 1, true), "bob's token in an answer")
    end
    assert.equal(0, h:stop())
    helper.assert_no_secret(ALICE, h:log())
    helper.assert_no_secret(BOB:sub(1, 20), h:log())
    helper.assert_no_secret(c.cookie, h:log())
  end)

  it("ends the session on logout: the cookie no longer works", function()
    local srv = helper.redis_start()
    local h = start(srv)
    local c = console.client(h.port)
    c:login(ALICE)
    local second = console.client(h.port)
    second:login(ALICE)
    assert.are_not.equal(c.cookie, second.cookie)
    assert.are_not.equal(c.csrf, second.csrf)
    -- logout is a POST like any other: CSRF token needed
    local res = c:post("/logout", "", { csrf = false })
    assert.equal(403, res.status)
    assert.equal(200, c:get("/api/session").status)
    res = c:post("/logout", "")
    assert.equal(303, res.status)
    assert.equal("/login", res.headers.location)
    assert.matches("^luastream_session=;.*Max%-Age=0", res.headers["set-cookie"])
    res = c:get("/api/session")
    assert.equal(401, res.status)
    res = c:get("/")
    assert.equal(303, res.status)
    assert.equal("/login", res.headers.location)
    -- the other session lives on
    assert.equal("alice", second:json("/api/session").name)
  end)
end)

describe("console POSTs, origins and Host", function()
  after_each(helper.cleanup)

  it("refuses a cookie POST without the CSRF token, with a wrong one, without Origin or from another origin", function()
    local srv = helper.redis_start()
    local h = start(srv)
    local c = console.client(h.port)
    c:login(ALICE)
    -- a second login, whose CSRF token is not alice's session's
    local bob = console.client(h.port)
    bob:login(BOB)
    local path = "/api/reload"
    local cases = {
      { "no CSRF token", { csrf = false } },
      { "a wrong CSRF token", { csrf = string.rep("0", #c.csrf) } },
      { "a short CSRF token", { csrf = c.csrf:sub(1, 16) } },
      { "another session's CSRF token", { csrf = bob.csrf } },
      { "no Origin", { origin = false } },
      { "another origin", { origin = "http://evil.example" } },
      { "another port", { origin = "http://127.0.0.1:" .. (h.port + 1) } },
      { "https", { origin = "https://127.0.0.1:" .. h.port } },
      { "null origin", { origin = "null" } },
      -- what a browser sends under Referrer-Policy: no-referrer, from another site
      { "null origin from another site", { origin = "null", headers = { { "Sec-Fetch-Site", "cross-site" } } } },
      { "null origin from a sibling site", { origin = "null", headers = { { "Sec-Fetch-Site", "same-site" } } } },
      { "another origin said same-origin", { origin = "http://evil.example",
        headers = { { "Sec-Fetch-Site", "same-origin" } } } },
    }
    for _, case in ipairs(cases) do
      local res = c:post(path, "", case[2])
      assert.equal(403, res.status, case[1] .. ": " .. res.body)
      assert.is_string(res.json.error, case[1])
    end
    assert.equal(0, h:count({ msg = "console action: reloading every handler" }))
    -- the same request, right: done; and as the console's own page sends it
    -- under no-referrer (Origin: null, Sec-Fetch-Site: same-origin)
    local res = c:post(path, "")
    assert.equal(200, res.status, res.body)
    res = c:post(path, "", { origin = "null", headers = { { "Sec-Fetch-Site", "same-origin" } } })
    assert.equal(200, res.status, res.body)
    h:wait_records({ msg = "console action: reloading every handler", who = "alice", action = "reload" }, 2, 5)
  end)

  it("refuses POST /login from another origin or none, and a bearer POST from a foreign origin", function()
    local srv = helper.redis_start()
    local h = start(srv)
    local c = console.client(h.port)
    for _, origin in ipairs { "http://evil.example", false, "http://localhost:" .. h.port } do
      local res = c:post("/login", { { "token", ALICE } }, { origin = origin })
      assert.equal(403, res.status, tostring(origin))
      assert.is_nil(res.headers["set-cookie"], tostring(origin))
    end
    -- from localhost:PORT with Host localhost:PORT: its own origin
    local lc = console.client(h.port, { host = "localhost:" .. h.port })
    lc:login(ALICE)
    assert.equal("alice", lc:json("/api/session").name)

    local b = console.client(h.port, { bearer = BOB, origin = false })
    local res = b:post("/api/reload", "", { origin = "http://evil.example" })
    assert.equal(403, res.status)
    assert.equal(0, h:count({ msg = "console action: reloading every handler" }))
    -- a bearer POST without Origin (a script) needs no CSRF token; with its own origin neither
    res = b:post("/api/reload", "")
    assert.equal(200, res.status, res.body)
    res = b:post("/api/reload", "", { origin = "http://127.0.0.1:" .. h.port })
    assert.equal(200, res.status, res.body)
    h:wait_records({ msg = "console action: reloading every handler", who = "bob" }, 2, 5)
  end)

  it("answers 421 to a Host that is a DNS name, on pages and API; accepts localhost and IP literals with the port", function()
    local srv = helper.redis_start()
    local h = start(srv)
    local port = h.port
    for _, host in ipairs { "evil.example:" .. port, "evil.example", "127.0.0.1.nip.io:" .. port,
      "localhost.evil.example:" .. port, "127.0.0.1:" .. (port + 1), "localhost:" .. (port + 1), "" } do
      local c = console.client(port, { host = host, bearer = ALICE })
      for _, path in ipairs { "/", "/login", "/api/session", "/api/overview", "/assets/console.js" } do
        local res = c:get(path)
        assert.equal(421, res.status, host .. " " .. path .. ": " .. res.text)
        assert.matches("^HTTP/1%.1 421 Misdirected Request\r\n", res.text)
      end
      local res = c:post("/login", { { "token", ALICE } })
      assert.equal(421, res.status, host)
      assert.is_nil(res.headers["set-cookie"])
    end
    -- no Host header at all
    local res = assert(require("tests.integration.support.http").request(port, { host = false, path = "/api/session" }))
    console.check_headers(res, "no Host")
    assert.equal(421, res.status)
    for _, host in ipairs { "127.0.0.1:" .. port, "localhost:" .. port, "LOCALHOST:" .. port, "127.0.0.2:" .. port,
      "[::1]:" .. port } do
      local c = console.client(port, { host = host, bearer = ALICE })
      assert.equal(200, c:get("/api/session").status, host)
      assert.equal(200, c:get("/").status, host)
    end
  end)

  it("never grants CORS, also to a preflight or a request with an Origin", function()
    local srv = helper.redis_start()
    local h = start(srv)
    local c = console.client(h.port, { bearer = ALICE })
    -- the client checks every answer for Access-Control-* headers
    local res = c:get("/api/session", { headers = { { "Origin", "http://evil.example" } } })
    assert.equal(200, res.status) -- a GET reads nothing a page of another origin may see
    res = c:request("OPTIONS", "/api/session", { headers = { { "Origin", "http://evil.example" },
      { "Access-Control-Request-Method", "POST" } } })
    assert.equal(405, res.status)
    res = c:get("/nope")
    assert.equal(200, res.status) -- a page route: the app
    res = c:get("/api/nope")
    assert.equal(404, res.status)
    assert.is_string(res.json.error)
  end)
end)

describe("console tokens reloaded and what the command line must say", function()
  after_each(helper.cleanup)

  it("ends the sessions and bearer use of a token removed from the file at SIGHUP, keeping the others", function()
    local srv = helper.redis_start()
    local h = start(srv)
    local alice, bob = console.client(h.port), console.client(h.port)
    alice:login(ALICE)
    bob:login(BOB)
    local bob_bearer = console.client(h.port, { bearer = BOB })
    assert.equal(200, bob_bearer:get("/api/session").status)
    -- bob's line goes; the file keeps its mode
    local helper_files = require "tests.integration.support.files"
    helper_files.write_file(h.tokens, "alice " .. ALICE .. "\n")
    h:signal("HUP")
    h:wait_records({ msg = "console tokens reloaded", count = "1" }, 1, 10)
    assert.equal(401, bob:get("/api/session").status)
    assert.equal(401, bob_bearer:get("/api/session").status)
    assert.equal("alice", alice:json("/api/session").name)
    -- a file refused at SIGHUP keeps the tokens read before
    assert(os.execute("chmod 644 " .. helper_files.shell_quote(h.tokens)))
    h:signal("HUP")
    h:wait_records({ msg = "console tokens not reloaded: the ones read before stay" }, 1, 10)
    assert.equal("alice", alice:json("/api/session").name)
  end)

  it("refuses a --console without a host, naming --console, and a --console-origin that is no Origin", function()
    local tokens = console.tokens_file()
    local code, out, err = helper.luastream("console", "--redis", "redis://127.0.0.1:1", "--console", "127.0.0.1",
      "--console-tokens", tokens, "orders")
    assert.equal(2, code)
    assert.matches("--console needs ADDR:PORT", out .. err, 1, true)
    code, out, err = helper.luastream("console", "--redis", "redis://127.0.0.1:1", "--console", ":0",
      "--console-tokens", tokens, "orders")
    assert.equal(1, code)
    assert.matches("--console :0: give the address to listen on", out .. err, 1, true)
    for _, origin in ipairs { "https://streams.example.com/", "streams.example.com", "https://a/b" } do
      code, out, err = helper.luastream("console", "--redis", "redis://127.0.0.1:1", "--console", "127.0.0.1:0",
        "--console-tokens", tokens, "--console-origin", origin, "orders")
      assert.equal(1, code, origin)
      assert.matches("--console-origin " .. origin .. ": want SCHEME://HOST[:PORT]", out .. err, 1, true)
    end
  end)

  it("marks the session cookie Secure behind an https origin, and logs a wrong bearer token and a logout", function()
    local srv = helper.redis_start()
    local h = console.start({ server = srv, dir = helper.handlers_dir({ ["ship.lua"] = HANDLER }),
      args = { "--console-origin", "https://streams.example.com" } })
    local c = console.client(h.port, { origin = "https://streams.example.com" })
    c:login(ALICE)
    assert.matches("; Secure", c.set_cookie, 1, true)
    local res = console.client(h.port, { bearer = string.rep("0", 32) }):get("/api/session")
    assert.equal(401, res.status)
    h:wait_records({ msg = "console request refused: wrong bearer token", path = "/api/session" }, 1, 5)
    assert.equal(303, c:post("/logout", "").status)
    h:wait_records({ msg = "console logout", who = "alice" }, 1, 5)
  end)
end)
