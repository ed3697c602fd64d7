-- TLS to a single Redis server (rediss://), every server here asking for a
-- client certificate (tls-auth-clients yes) unless a case says otherwise: the
-- shipped example service (handlers/before-8.4) posting and screening payments
-- exactly once through a server restart, the handshake and expiry metrics, an
-- encrypted client key, the settings as URL parameters, publish, status and
-- dead-letters over TLS, a handler's own TLS connection, certificates rotated
-- on SIGHUP, and each way TLS can fail: at start, where run exits naming the
-- server and what to change, and later, on /readyz.
local helper = require "tests.integration.helper"
local cjson = require "cjson"
local tls = require "tests.integration.support.tls"
local ledger = require "tests.integration.support.ledger"
local processes = require "tests.integration.support.processes"

local READY = 'msg="host ready"'
local EXAMPLES = helper.repo_root .. "/handlers/before-8.4"
local PAYMENTS = 10000
local POSTED = { msg = "payment posted" }

local POST = [[
local ls = require "luastream"
return {
  stream = "payments", group = "ledger", start = "beginning", dead_letter = "payments.dead",
  handle = function(payment)
    ls.log.info("payment posted", { payment_id = payment.id })
  end,
}
]]

local luastream = helper.luastream

local function post_dir() return helper.handlers_dir({ ["post.lua"] = POST }) end

-- list followed by the rest of the arguments.
local function plus(list, ...)
  local out = {}
  for _, a in ipairs(list) do out[#out + 1] = a end
  for _, a in ipairs { ... } do out[#out + 1] = a end
  return out
end

-- The samples of metric `name` on the host's /metrics, by their label text.
local function samples(port, name)
  local code, body = helper.http_get(port, "/metrics")
  assert.equal(200, code, tostring(body))
  local out, found = {}, false
  for line in body:gmatch("[^\n]+") do
    local n, labels, v = line:match("^([%w_:]+)(%b{}) (%S+)$")
    if not n then
      labels = ""
      n, v = line:match("^([%w_:]+) (%S+)$")
    end
    if n == name then
      out[labels] = tonumber(v)
      found = true
    end
  end
  assert(found, "no " .. name .. " on /metrics:\n" .. body)
  return out
end

local function handshakes(port)
  local sum = 0
  for _, v in pairs(samples(port, "luastream_redis_tls_handshakes_total")) do sum = sum + v end
  return sum
end

-- The expiry gauge of the client certificate, or of server (IP:PORT)'s.
local function expiry_days(port, which, server)
  local all = samples(port, "luastream_redis_tls_certificate_expiry_days")
  for labels, v in pairs(all) do
    if labels:find('certificate="' .. which .. '"', 1, true)
      and (not server or labels:find('server="' .. server .. '"', 1, true)) then
      return v
    end
  end
  local seen = {}
  for labels in pairs(all) do seen[#seen + 1] = labels end
  error(string.format("no luastream_redis_tls_certificate_expiry_days for %s %s among: %s", which, server or "",
    table.concat(seen, " ")))
end

-- Clients of srv other than the redis-cli asking (CLIENT LIST): the host's.
local function host_connections(srv)
  local n = 0
  for line in srv:cli("CLIENT", "LIST"):gmatch("[^\n]+") do
    if not line:find(" cmd=client|list ", 1, true) then n = n + 1 end
  end
  return n
end

-- Waits until GET /readyz answers status with a body containing each piece.
local function wait_ready(port, status, pieces, timeout_s)
  return helper.wait_until(function()
    local code, body = helper.http_get(port, "/readyz")
    if code ~= status then return false, "last answer: " .. tostring(code) .. " " .. tostring(body) end
    for _, p in ipairs(pieces or {}) do
      if not (body and body:find(p, 1, true)) then return false, "last answer: " .. code .. " " .. tostring(body) end
    end
    return body
  end, timeout_s or 20, "/readyz " .. status .. " " .. table.concat(pieces or {}, ", "))
end

describe("TLS to a Redis server", function()
  after_each(helper.cleanup)

  it("runs the example service over rediss:// with a client certificate, exactly once through a server restart #slow", function()
    local certs = tls.redis_certs()
    local srv = helper.redis_start({
      tls = tls.server_opts(certs), appendonly = true, args = { "--appendfsync", "always" },
    })
    assert.matches("^rediss://127%.0%.0%.1:", srv.url)
    local host = helper.host_start(plus(tls.client_args(certs), "--http", "127.0.0.1:0"),
      { server = srv, dir = EXAMPLES })
    local port = helper.health_port(host)
    host:wait_log(READY, 30, { plain = true })

    -- The expiry gauges: the client certificate is valid for 10 days, the
    -- server's for 20, both from a few seconds ago.
    local client_days = expiry_days(port, "client")
    local server_days = expiry_days(port, "server", "127.0.0.1:" .. srv.port)
    assert(client_days > 9.9 and client_days <= 10, "client certificate expires in " .. client_days .. " days")
    assert(server_days > 19.9 and server_days <= 20, "server certificate expires in " .. server_days .. " days")

    srv:pipe(ledger.commands(1, PAYMENTS))
    helper.wait_until(function() return srv:xlen("payments.posted") >= 100 end, 30, "the first payments posted")
    -- One handshake per connection, none per command: hundreds of commands
    -- later the count has not moved, and it is the number of connections.
    local before = handshakes(port)
    local connections = host_connections(srv)
    helper.wait_until(function() return srv:xlen("payments.posted") >= PAYMENTS / 10 end, 60,
      "a tenth of the payments posted")
    local after = handshakes(port)
    assert.equal(before, after, "TLS handshakes while commands ran on open connections")
    assert.equal(connections, after, "TLS handshakes against the host's connections on the server")

    local posted_at_kill = srv:xlen("payments.posted")
    srv:kill()
    srv:restart()
    assert(posted_at_kill < PAYMENTS, "every payment was posted before the server was killed: not mid-stream")
    io.stderr:write(string.format("tls: %d of %d payments posted when the server was killed\n", posted_at_kill, PAYMENTS))

    ledger.wait_posted(srv, { payments = PAYMENTS }, 90)
    helper.wait_until(function()
      local g = srv:group("payments", "fraud")
      return g and g.pending == 0 and srv:xlen("payments.screened") >= PAYMENTS,
        g and ("pending " .. g.pending)
    end, 60, "every payment screened")
    -- the reconnection made new TLS sessions
    assert(handshakes(port) > after, "no TLS handshake after the server restart")
    assert.is_true(host:alive())
    assert.equal(0, host:stop())

    ledger.assert_exact(srv, { payments = PAYMENTS })
    local screened = {}
    for _, reply in ipairs(srv:xrange("payments.screened")) do
      local id = cjson.decode(reply.fields.data).payment_id
      assert.is_nil(screened[id], "payment " .. id .. " screened twice")
      screened[id] = true
    end
    for id = 1, PAYMENTS do assert(screened[id], "payment " .. id .. " never screened") end
  end)

  it("takes its settings from URL parameters or options, an encrypted key with its password file; publish, status and dead-letters too", function()
    local certs = tls.redis_certs()
    local srv = helper.redis_start({ tls = tls.server_opts(certs) })
    local base = "rediss://127.0.0.1:" .. srv.port
    local encrypted = { "--tls-ca", certs.ca.cert, "--tls-cert", certs.client.cert,
      "--tls-key", certs.client.key_enc, "--tls-key-password-file", certs.client.password_file }

    -- publish with options and the encrypted key
    local code, out, err = luastream("publish", "--redis", base, encrypted,
      "payments", helper.payment(1, "acme", 500), "--key", "acme")
    assert.equal(0, code, out .. err)
    local first = helper.trim(out)
    assert.equal(1, #srv:xrange("payments", first, first))
    helper.assert_no_secret("k3y-pass", out, err)

    -- run with everything in the URL, percent-encoded
    local host = helper.host_start({}, { url = base .. tls.url_params(certs), dir = post_dir() })
    host:wait_log(READY, 20, { plain = true })
    host:wait_records(POSTED, 1, 20, "the payment published before")
    -- publish with the encrypted key named in the URL
    local url = base .. "?tls_ca=" .. tls.encode(certs.ca.cert) .. "&tls_cert=" .. tls.encode(certs.client.cert)
      .. "&tls_key=" .. tls.encode(certs.client.key_enc)
      .. "&tls_key_password_file=" .. tls.encode(certs.client.password_file)
    code, out, err = helper.luastream("publish", "--redis", url, "payments", helper.payment(2, "acme", 700))
    assert.equal(0, code, out .. err)
    host:wait_records(POSTED, 2, 20, "the payment published with URL parameters")
    assert.equal(0, host:stop())

    -- run with the encrypted key and its password file as options
    host = helper.host_start(encrypted, { url = base, dir = post_dir() })
    host:wait_log(READY, 20, { plain = true })
    code, out, err = luastream("publish", "--redis", base, tls.client_args(certs),
      "payments", helper.payment(3, "acme", 900))
    assert.equal(0, code, out .. err)
    host:wait_records({ msg = "payment posted", payment_id = "3" }, 1, 20, "the payment published last")
    helper.assert_no_secret("k3y-pass", host:log())
    assert.equal(0, host:stop())

    -- status reads the group over TLS
    code, out, err = luastream("status", "--redis", base, tls.client_args(certs), "payments")
    assert(code == 0 or code == 1, "status exit " .. code .. ": " .. out .. err)
    assert.matches("ledger", out, 1, true)
    code, out, err = helper.luastream("status", "--redis", base .. tls.url_params(certs), "--json", "payments")
    assert(code == 0 or code == 1, "status exit " .. code .. ": " .. out .. err)
    assert.equal("ledger", cjson.decode(out).groups[1].group)

    -- dead-letters list over TLS
    local dl = srv:cli("XADD", "payments.dead", "*", "data", "{}", "dead-letter-stream", "payments",
      "dead-letter-group", "ledger", "dead-letter-id", first, "dead-letter-reason", "rejected")
    code, out, err = luastream("dead-letters", "list", "--redis", base, tls.client_args(certs), "payments.dead")
    assert.equal(0, code, out .. err)
    assert.matches(dl, out, 1, true)
    assert.matches("rejected", out, 1, true)
  end)

  it("gives a handler its own TLS connection with ls.redis.connect(\"rediss://...?tls_...\"), checked as the host's", function()
    local certs = tls.redis_certs()
    local srv = helper.redis_start({ tls = tls.server_opts(certs) })
    local other = helper.redis_start({ tls = tls.server_opts(certs) })
    -- a server whose certificate the handler's URL does not trust
    local stranger = helper.redis_start({ tls = tls.server_opts(certs,
      { cert = certs.other_server.cert, key = certs.other_server.key, cli_ca = certs.other_ca.cert }) })
    local src = [[
local ls = require "luastream"
local other = ls.redis.connect(OTHER_URL)
local stranger = ls.redis.connect(STRANGER_URL)
return {
  stream = "payments", group = "ledger", start = "beginning",
  handle = function(p)
    if p.probe then
      local _, err = stranger.pcall("PING")
      ls.log.info("probed", { payment_id = p.id, err = tostring(err) })
      return
    end
    local balance = other.call("HINCRBY", "balances", p.account, p.amount_cents)
    ls.log.info("payment posted", { payment_id = p.id, balance = balance })
  end,
}
]]
    local urls = {
      OTHER_URL = other.url .. "/3" .. tls.url_params(certs),
      STRANGER_URL = stranger.url .. tls.url_params(certs),
    }
    src = src:gsub("[%u_]+_URL", function(name) return string.format("%q", urls[name]) end)
    local host = helper.host_start(tls.client_args(certs), { server = srv, dir = helper.handlers_dir({ ["post.lua"] = src }) })
    host:wait_log(READY, 20, { plain = true })
    srv:pipe(helper.payment_commands(1, 20, 2))
    host:wait_records(POSTED, 20, 20, "20 payments posted to the second server")
    -- acct-1 gets payments 1, 3, ..., 19 (amounts 100 + id), in db 3 of the second server only
    assert.equal(tostring(10 * 100 + 100), other:cli("-n", "3", "HGET", "balances", "acct-1"))
    assert.equal(tostring(10 * 100 + 110), other:cli("-n", "3", "HGET", "balances", "acct-2"))
    assert.equal("0", srv:cli("EXISTS", "balances"))

    -- the untrusted server: its handshakes fail, logged with the reason, and
    -- the handler's calls to it fail while the host carries on
    local failed = host:wait_records(function(r)
      return r.msg == "redis TLS handshake failed" and r.conn == "handler calls"
        and r.redis:find(stranger.url, 1, true) == 1
    end, 1, 20, "the handshake with the untrusted server failing")[1]
    assert.matches("not trusted", failed.error, 1, true)
    srv:cli("XADD", "payments", "*", "data", '{"probe":true,"id":100}')
    local probed = host:wait_records({ msg = "probed" }, 1, 20, "a call to the untrusted server")[1]
    assert.matches("^redis PING %(" .. stranger.url:gsub("%p", "%%%0"), probed.err)
    -- the handler is told why, not only that the server is away
    assert.matches("not connected: TLS: the server's certificate is not trusted", probed.err, 1, true)
    assert.is_true(host:alive())
    assert.equal(0, host:stop())

    -- and a handler's URL cannot turn checking off
    local bad = src:gsub("local stranger = ls%.redis%.connect%(STRANGER_URL%)", "")
    bad = bad:gsub('"' .. urls.OTHER_URL:gsub("%p", "%%%0") .. '"',
      function() return string.format("%q", urls.OTHER_URL .. "&tls_skip_verify=1") end)
    assert.matches("tls_skip_verify", bad, 1, true)
    local code, out, err = luastream("run", "--redis", srv.url, tls.client_args(certs),
      helper.handlers_dir({ ["post.lua"] = bad }), { timeout = 20 })
    assert.is_not.equal(0, code, out .. err)
    assert.matches("tls_skip_verify", out .. err, 1, true)
  end)

  it("uses the certificate files put in place when SIGHUP comes, also from a CA the server trusts alone after", function()
    local certs = tls.redis_certs()
    local srv = helper.redis_start({ tls = tls.server_opts(certs), appendonly = true, args = { "--appendfsync", "always" } })
    -- the host's client certificate, in files a deploy replaces
    local dir = helper.tmpdir("host-certs")
    local mine = tls.install(certs.client, dir .. "/client.pem", dir .. "/client.key")
    local host = helper.host_start(tls.client_args(certs, mine), { server = srv, dir = post_dir() })
    host:wait_log(READY, 20, { plain = true })
    srv:cli("XADD", "payments", "*", "data", '{"id":1}')
    host:wait_records(POSTED, 1, 20, "a payment before the rotation")

    -- SIGHUP, and the host says it read the files again.
    local function hup()
      local mark = host:mark()
      host:signal("HUP")
      return host:wait_log('msg="TLS files re-read"', 15, { plain = true, after = mark })
    end

    -- A new certificate from the same CA; the server restarts, the host reconnects.
    tls.install(certs:rotated_client(), mine.cert, mine.key)
    hup()
    srv:restart()
    srv:cli("XADD", "payments", "*", "data", '{"id":2}')
    host:wait_records(POSTED, 2, 30, "a payment after the rotation and the server's restart")

    -- A certificate file that does not load: said, and the files read before stay.
    helper.write_file(mine.cert, "not a certificate\n")
    local mark = host:mark()
    host:signal("HUP")
    host:wait_records(function(r)
      return r._pos > mark and (r.level == "error" or r.level == "warn") and r._line:find(mine.cert, 1, true) ~= nil
    end, 1, 15, "an error naming the certificate file that does not load")
    srv:restart()
    srv:cli("XADD", "payments", "*", "data", '{"id":20}')
    host:wait_records(POSTED, 3, 30, "a payment on the certificate read before")
    assert.equal(0, host:count(function(r) return r._pos > mark and r.msg == "TLS files re-read" end))

    -- Stricter: the server now trusts only a new client CA, so only the new
    -- file can be the certificate the host presents.
    local client_ca = tls.make_ca(certs.dir, "client-ca-2", "luastream second client CA")
    local newer = tls.issue(client_ca, "client-b", { cn = "luastream b", usage = "client" })
    local peer_b = tls.issue(client_ca, "peer-b", { cn = "redis peer b", usage = "client" })
    tls.install(newer, mine.cert, mine.key)
    hup()
    srv.tls.ca, srv.tls.client_cert, srv.tls.client_key = client_ca.cert, peer_b.cert, peer_b.key
    srv.tls.cli_ca = certs.ca.cert -- the server's own certificate is still the first CA's
    srv:restart()
    -- the old certificate is refused now
    local code, out, err = processes.run({ "redis-cli", "-p", srv.port, "--tls", "--cacert", certs.ca.cert,
      "--cert", certs.client.cert, "--key", certs.client.key, "PING" }, { timeout = 10 })
    assert(code ~= 0 or not out:find("PONG", 1, true), "the server still accepts the first client certificate: " .. out .. err)
    srv:cli("XADD", "payments", "*", "data", '{"id":3}')
    host:wait_records(POSTED, 4, 30, "a payment with the certificate of the new CA")
    assert.is_true(host:alive())
    assert.equal(0, host:stop())
  end)

  it("says on /readyz that the server's certificate is not trusted once it is, ready again when it is fixed", function()
    local certs = tls.redis_certs()
    local srv = helper.redis_start({ tls = tls.server_opts(certs), appendonly = true, args = { "--appendfsync", "always" } })
    local host = helper.host_start(plus(tls.client_args(certs), "--http", "127.0.0.1:0"),
      { server = srv, dir = post_dir() })
    local port = helper.health_port(host)
    host:wait_log(READY, 20, { plain = true })
    wait_ready(port, 200)

    srv.tls.cert, srv.tls.key, srv.tls.cli_ca = certs.other_server.cert, certs.other_server.key, certs.other_ca.cert
    srv:restart()
    local body = wait_ready(port, 503, { "not trusted" }, 30)
    assert.matches("127.0.0.1:" .. srv.port, body, 1, true)
    assert.is_true(host:alive())

    srv.tls.cert, srv.tls.key, srv.tls.cli_ca = certs.server.cert, certs.server.key, nil
    srv:restart()
    wait_ready(port, 200, nil, 30)
    srv:cli("XADD", "payments", "*", "data", '{"id":1}')
    host:wait_records(POSTED, 1, 20, "a payment once the certificate is trusted again")
    assert.equal(0, host:stop())
  end)
end)

describe("TLS failures at start", function()
  local certs, certs_dir
  -- One set of certificates for these tests (openssl takes a second to make
  -- them), in a folder of their own: cleanup() after each test would remove
  -- one from helper.tmpdir.
  lazy_setup(function()
    local code, out, err = processes.run({ "mktemp", "-d", (os.getenv("TMPDIR") or "/tmp") .. "/luastream-tls-spec-XXXXXX" })
    assert(code == 0, "mktemp: " .. out .. err)
    certs_dir = helper.trim(out)
    certs = tls.redis_certs(certs_dir)
  end)
  lazy_teardown(function()
    if certs_dir and certs_dir:find("/luastream%-tls%-spec%-") and os.getenv("LUASTREAM_KEEP_TMP") ~= "1" then
      os.execute("rm -rf '" .. certs_dir .. "'")
    end
  end)
  after_each(helper.cleanup)

  -- `luastream run --redis URL ARGS... DIR`: exit code, all it printed, seconds.
  local function run(url, args)
    local argv = { "run", "--redis", url }
    for _, a in ipairs(args or {}) do argv[#argv + 1] = a end
    argv[#argv + 1] = post_dir()
    argv[#argv + 1] = { timeout = 20 }
    local t0 = helper.now()
    local code, out, err = helper.luastream(unpack(argv))
    return code, out .. err, helper.now() - t0
  end

  -- run exits 1 at once (as for a wrong password), naming shown (the redacted
  -- URL) and each piece.
  local function assert_refused(shown, pieces, code, text, took)
    assert.equal(1, code, text)
    assert(took < 8, "took " .. took .. " s:\n" .. text)
    assert.matches(shown, text, 1, true)
    for _, p in ipairs(pieces) do assert.matches(p, text, 1, true) end
  end

  local function server(more, opts)
    opts = opts or {}
    opts.tls = tls.server_opts(certs, more)
    return helper.redis_start(opts)
  end

  it("a server certificate from an unknown CA: not trusted, --tls-ca; --tls-skip-verify connects, warning", function()
    local srv = server({ cert = certs.other_server.cert, key = certs.other_server.key, cli_ca = certs.other_ca.cert },
      { requirepass = "s3cret-pw" })
    local url = "rediss://:s3cret-pw@127.0.0.1:" .. srv.port
    local code, text, took = run(url, tls.client_args(certs))
    assert_refused("rediss://:***@127.0.0.1:" .. srv.port, { "not trusted", "--tls-ca" }, code, text, took)
    helper.assert_no_secret("s3cret-pw", text)
    -- the one-shot commands end at once, saying the same
    for _, cmd in ipairs {
      { "publish", "--redis", url, tls.client_args(certs), "payments", "{}" },
      { "status", "--redis", url, tls.client_args(certs), "payments" },
      { "dead-letters", "list", "--redis", url, tls.client_args(certs), "payments.dead" },
    } do
      local t0 = helper.now()
      local out, err
      code, out, err = luastream(unpack(cmd))
      local what = cmd[1] .. " " .. cmd[2]
      assert.is_not.equal(0, code, what .. ": " .. out .. err)
      assert(helper.now() - t0 < 8, what .. " took " .. (helper.now() - t0) .. " s")
      assert(err:find("not trusted", 1, true), what .. ": " .. out .. err)
      helper.assert_no_secret("s3cret-pw", out, err)
    end
    assert.equal(0, srv:call("EXISTS", "payments"))

    local host = helper.host_start(plus(tls.client_args(certs), "--tls-skip-verify"), { url = url, dir = post_dir() })
    host:wait_log(READY, 20, { plain = true })
    local warned = host:records(function(r)
      return (r.level == "warn" or r.level == "error") and r._line:find("skip-verify", 1, true) ~= nil
    end)
    assert(#warned >= 1, "no warning naming --tls-skip-verify:\n" .. host:log())
    srv:cli("XADD", "payments", "*", "data", '{"id":1}')
    host:wait_records(POSTED, 1, 20, "a payment without verification")
    assert.equal(0, host:stop())
    helper.assert_no_secret("s3cret-pw", host:log())
  end)

  it("a certificate that does not name the host: does not match, --tls-server-name; which then connects", function()
    local srv = server({ cert = certs.wrong_name.cert, key = certs.wrong_name.key })
    local code, text, took = run(srv.url, tls.client_args(certs))
    assert_refused(srv.url, { "does not match", "--tls-server-name" }, code, text, took)

    local host = helper.host_start(plus(tls.client_args(certs), "--tls-server-name", "wrong.example"),
      { server = srv, dir = post_dir() })
    host:wait_log(READY, 20, { plain = true })
    assert.equal(0, host:stop())
  end)

  it("an expired server certificate: expired", function()
    assert.is_true(tls.expires_within(certs.expired.cert, 0), "the fixture is not expired")
    local srv = server({ cert = certs.expired.cert, key = certs.expired.key, insecure = true })
    local code, text, took = run(srv.url, tls.client_args(certs))
    -- the message says when (the day it expired: yesterday)
    assert_refused(srv.url, { "expired", certs.expired.expired_on }, code, text, took)
  end)

  it("a server that asks for a client certificate, none given: client certificate, --tls-cert", function()
    local srv = server()
    local code, text, took = run(srv.url, { "--tls-ca", certs.ca.cert })
    assert_refused(srv.url, { "client certificate", "--tls-cert" }, code, text, took)
    -- a client certificate from a CA the server does not trust: refused, said so
    local stranger = tls.issue(certs.other_ca, "other-client", { cn = "stranger", usage = "client" })
    code, text, took = run(srv.url, tls.client_args(certs, stranger))
    assert_refused(srv.url, { "refused the client certificate" }, code, text, took)
    -- with tls-auth-clients no the same works
    local open = server({ auth_clients = "no" })
    local host = helper.host_start({ "--tls-ca", certs.ca.cert }, { server = open, dir = post_dir() })
    host:wait_log(READY, 20, { plain = true })
    assert.equal(0, host:stop())
  end)

  it("rediss:// to a plaintext port: not speaking TLS, redis://; redis:// to a TLS port: rediss://", function()
    local plain = helper.redis_start()
    local url = "rediss://127.0.0.1:" .. plain.port
    local code, text, took = run(url, tls.client_args(certs))
    assert_refused(url, { "not speaking TLS", "redis://" }, code, text, took)

    local srv = server()
    url = "redis://127.0.0.1:" .. srv.port
    code, text, took = run(url)
    assert_refused(url, { "rediss://" }, code, text, took)
  end)

  it("refuses a key file others can read, tls_skip_verify in a URL, TLS settings with redis:// and a setting given twice", function()
    local srv = server()
    local dir = helper.tmpdir("loose-key")
    local loose = dir .. "/client.key"
    helper.write_file(loose, helper.read_file(certs.client.key))
    assert(os.execute("chmod 644 '" .. loose .. "'"))
    local cases = {
      { srv.url, { "--tls-ca", certs.ca.cert, "--tls-cert", certs.client.cert, "--tls-key", loose },
        { loose, "chmod 600" } },
      { srv.url .. tls.url_params(certs) .. "&tls_skip_verify=1", {}, { "tls_skip_verify" } },
      { "redis://127.0.0.1:" .. srv.port, tls.client_args(certs), { "--tls-ca" } },
      { "redis://127.0.0.1:" .. srv.port .. tls.url_params(certs), {}, { "tls_ca" } },
      { srv.url .. "?tls_ca=" .. tls.encode(certs.ca.cert), tls.client_args(certs), { "tls_ca", "--tls-ca" } },
    }
    for _, case in ipairs(cases) do
      local code, text, took = run(case[1], case[2])
      local what = case[1] .. " " .. table.concat(case[2], " ")
      assert(code ~= 0, what .. ": run exited 0")
      assert(took < 8, what .. ": took " .. took .. " s")
      for _, p in ipairs(case[3]) do
        assert(text:find(p, 1, true), what .. ": no " .. p .. " in:\n" .. text)
      end
    end
    -- publish refuses the same way
    local code, out, err = helper.luastream("publish", "--redis", srv.url .. "?tls_skip_verify=1", "payments", "{}")
    assert(code ~= 0, "publish with tls_skip_verify in the URL exited 0")
    assert.matches("tls_skip_verify", out .. err, 1, true)
    assert.equal(0, srv:call("EXISTS", "payments"))
  end)
end)
