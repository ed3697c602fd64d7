-- The specs' own HTTP server (support/http_server.py) checked with the curl
-- command line, so the HTTP specs can trust what it answers and counts.
local cjson = require "cjson"
local helper = require "tests.integration.helper"
local http_server = require "tests.integration.support.http_server"
local processes = require "tests.integration.support.processes"

-- curl's exit codes the specs rely on.
local PARTIAL_FILE, TIMED_OUT, BAD_PEER_CERT = 18, 28, 60

-- Status code and body of one request (args: extra curl arguments, a list).
local function request(srv, path, args)
  local argv = { "--max-time", "10", "-w", "\n%{http_code}" }
  for _, a in ipairs(args or {}) do argv[#argv + 1] = a end
  argv[#argv + 1] = srv.url .. path
  local code, out, err = srv:curl(argv)
  assert.are.equal(0, code, err)
  local body, status = out:match("^(.*)\n(%d+)$")
  return tonumber(status), body
end

-- Response headers (lower-case names) and the byte count of a GET of path.
local function download(srv, path)
  local code, out, err = srv:curl { "--max-time", "10", "-D", "-", "-o", "/dev/null",
    "-w", "size=%{size_download}", srv.url .. path }
  assert.are.equal(0, code, err)
  local headers = {}
  for name, value in out:gmatch("([%w%-]+): ([^\r\n]*)\r\n") do headers[name:lower()] = value end
  return headers, tonumber(out:match("size=(%d+)$"))
end

describe("the test HTTP server", function()
  after_each(helper.cleanup)

  it("echoes a JSON POST (method, path, query, headers, body) and records it", function()
    local srv = http_server.start()
    local payload = { id = "p-1", amount = 1250, tags = { "a", "b" } }
    local status, body = request(srv, "/echo?attempt=2", {
      "-X", "POST", "-H", "Content-Type: application/json", "-H", "Idempotency-Key: k-42",
      "--data-binary", cjson.encode(payload) })
    assert.are.equal(200, status)
    local echo = cjson.decode(body)
    assert.are.equal("POST", echo.method)
    assert.are.equal("/echo", echo.path)
    assert.are.equal("attempt=2", echo.query)
    assert.are.equal("application/json", echo.headers["content-type"])
    assert.are.equal("k-42", echo.headers["idempotency-key"])
    assert.are.same(payload, cjson.decode(echo.body))

    request(srv, "/echo", { "-X", "PUT", "--data-binary", "second" })
    local seen = srv:requests()
    assert.are.equal(2, #seen)
    assert.are.same(echo, seen[1])
    assert.are.equal("PUT", seen[2].method)
    assert.are.equal("second", seen[2].body)
    srv:clear()
    assert.are.same({}, srv:requests())
    assert.are.equal(0, srv:stop())
  end)

  it("reads a chunked request body", function()
    local srv = http_server.start()
    local _, body = request(srv, "/echo", { "-H", "Transfer-Encoding: chunked", "--data-binary", "in chunks" })
    assert.are.equal("in chunks", cjson.decode(body).body)
  end)

  it("answers the status a path asks for, with Location for 3xx, and 404 elsewhere", function()
    local srv = http_server.start()
    for _, want in ipairs { 200, 201, 400, 429, 500, 503 } do
      local status, body = request(srv, "/status/" .. want)
      assert.are.equal(want, status)
      assert.are.same({ status = want }, cjson.decode(body))
    end
    local headers = download(srv, "/status/302")
    assert.are.equal("/echo", headers.location)
    local status, body = request(srv, "/nowhere")
    assert.are.equal(404, status)
    assert.are.equal("/nowhere", cjson.decode(body).path)
  end)

  it("keeps connections alive, and counts connections and requests apart from /stats", function()
    local srv = http_server.start()
    local code, _, err = srv:curl { "-o", "/dev/null", "-o", "/dev/null", srv.url .. "/echo", srv.url .. "/status/204" }
    assert.are.equal(0, code, err)
    local stats = srv:stats()
    assert.are.equal(1, stats.connections)
    assert.are.equal(2, stats.requests)
    assert.are.equal(0, stats.in_flight)
    request(srv, "/echo")
    stats = srv:stats()
    assert.are.equal(2, stats.connections)
    assert.are.equal(3, stats.requests)
    assert.is_true(stats.accepted >= 4) -- the two /stats connections too
  end)

  it("counts the most requests in progress at once", function()
    local srv = http_server.start()
    local url = srv.url .. "/slow?ms=300"
    local code, out, err = srv:curl { "--parallel", "--parallel-immediate", "--parallel-max", "3",
      "-o", "/dev/null", "-o", "/dev/null", "-o", "/dev/null", "-w", "%{http_code}\n", url, url, url }
    assert.are.equal(0, code, err)
    assert.are.equal("200\n200\n200\n", out)
    local stats = srv:stats()
    assert.are.equal(3, stats.max_concurrent, cjson.encode(stats))
    assert.are.equal(3, stats.connections)
  end)

  it("answers /slow after the time asked", function()
    local srv = http_server.start()
    local t0 = helper.now()
    local status, body = request(srv, "/slow?ms=300")
    assert.are.equal(200, status)
    assert.are.same({ slept_ms = 300 }, cjson.decode(body))
    assert.is_true(helper.now() - t0 >= 0.3)
  end)

  it("answers /outage 503 with its Retry-After for the time asked from its first request, then echoes", function()
    local srv = http_server.start()
    local path = "/outage?ms=1500&retry_after=5"
    local t0 = helper.now()
    local headers = download(srv, path)
    assert.are.equal("5", headers["retry-after"])
    local status = request(srv, path)
    assert.are.equal(503, status)
    assert.are.equal(0, #srv:requests(), "a 503 is not recorded")
    helper.wait_until(function() return request(srv, path .. "&n=1") == 200 end, 10, "the outage over")
    assert.is_true(helper.now() - t0 >= 1.5)
    local stats = srv:stats()
    assert.is_true(stats.refused >= 2, "refused: " .. stats.refused)
    assert.are.equal(0, stats.outage_ms_left)
    local recorded = srv:requests()
    assert.are.equal(1, #recorded)
    assert.are.equal("/outage", recorded[1].path)
    assert.are.equal("ms=1500&retry_after=5&n=1", recorded[1].query)
  end)

  it("sends big bodies of the exact length, with Content-Length or chunked", function()
    local srv = http_server.start()
    local n = 3 * 65536 + 123
    local headers, size = download(srv, "/big?bytes=" .. n)
    assert.are.equal(n, size)
    assert.are.equal(tostring(n), headers["content-length"])
    assert.is_nil(headers["transfer-encoding"])
    headers, size = download(srv, "/big?bytes=" .. n .. "&chunked=1")
    assert.are.equal(n, size)
    assert.are.equal("chunked", headers["transfer-encoding"])
    assert.is_nil(headers["content-length"])
  end)

  it("closes mid-body: curl reports a partial file", function()
    local srv = http_server.start()
    local code, out = srv:curl { "--max-time", "10", srv.url .. "/close-mid-body" }
    assert.are.equal(PARTIAL_FILE, code)
    assert.are.equal(string.rep("x", 10), out)
  end)

  it("never answers /never, while other requests go on, until the client leaves", function()
    local srv = http_server.start()
    local held = processes.spawn({ "curl", "-sS", "--noproxy", "*", "--max-time", "20", srv.url .. "/never" },
      { pdeathsig = true, stderr = "stdout" })
    helper.wait_until(function() return srv:stats().in_flight == 1 end, 10, "/never in flight")
    assert.are.equal(200, (request(srv, "/echo")))
    assert.are.equal(1, srv:stats().in_flight)
    held:terminate(5)
    helper.wait_until(function() return srv:stats().in_flight == 0 end, 10, "/never to end with its client")

    local t0 = helper.now()
    local code = srv:curl { "--max-time", "1", srv.url .. "/never" }
    assert.are.equal(TIMED_OUT, code)
    assert.is_true(helper.now() - t0 < 5)
  end)

  it("stops cleanly at SIGTERM while a request is held", function()
    local srv = http_server.start()
    local held = processes.spawn({ "curl", "-sS", "--noproxy", "*", "--max-time", "20", srv.url .. "/never" },
      { pdeathsig = true, stderr = "stdout" })
    helper.wait_until(function() return srv:stats().in_flight == 1 end, 10, "/never in flight")
    local t0 = helper.now()
    assert.are.equal(0, srv:stop())
    assert.is_true(helper.now() - t0 < 3)
    local code = held:wait(10)
    assert.is_not_nil(code)
    assert.are_not.equal(0, code) -- an empty reply, not a response
  end)

  it("serves HTTPS with a test CA for localhost and 127.0.0.1; curl without the CA refuses it", function()
    local srv = http_server.start { tls = true }
    assert.are.equal("https://localhost:" .. srv.port, srv.url)
    assert.is_true(helper.read_file(srv.ca_file):find("BEGIN CERTIFICATE", 1, true) ~= nil)
    local status, body = request(srv, "/echo", { "--data-binary", "over tls" })
    assert.are.equal(200, status)
    assert.are.equal("over tls", cjson.decode(body).body)
    local code, out, err = srv:curl { "-o", "/dev/null", "-w", "%{http_code}",
      "https://127.0.0.1:" .. srv.port .. "/status/201" }
    assert.are.equal(0, code, err)
    assert.are.equal("201", out)
    assert.are.equal(2, srv:stats().requests)

    code = http_server.curl { "--max-time", "10", srv.url .. "/echo" }
    assert.are.equal(BAD_PEER_CERT, code)
    assert.are.equal(2, srv:stats().requests)
    local dir = srv.dir
    assert.are.equal(0, srv:stop())
    assert.is_false(helper.port_open(srv.port))
    assert.is_nil(io.open(dir .. "/ca.pem"))
  end)
end)
