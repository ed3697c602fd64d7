-- The TLS fixtures of the Redis TLS specs (support/tls.lua, and the TLS
-- servers of redis.lua and cluster.lua), checked with openssl and redis-cli
-- alone: each certificate is what its name says (so a spec expecting
-- luastream to refuse one is refused for that reason), and the servers speak
-- TLS as configured. Without luastream: a failure here is the fixture's.
local helper = require "tests.integration.helper"
local tls = require "tests.integration.support.tls"
local cluster = require "tests.integration.support.cluster"
local processes = require "tests.integration.support.processes"

-- `openssl verify ARGS... CERT`: ok, output.
local function verify(args, cert)
  local argv = { "openssl", "verify" }
  for _, a in ipairs(args) do argv[#argv + 1] = a end
  argv[#argv + 1] = cert
  local code, out, err = processes.run(argv, { timeout = 30 })
  return code == 0, out .. err
end

local function mode(path)
  local code, out = processes.run({ "stat", "-c", "%a", path })
  assert.equal(0, code)
  return helper.trim(out)
end

-- redis-cli PING to 127.0.0.1:port with args: the reply, or nil and why.
local function ping(port, args)
  local argv = { "redis-cli", "-h", "127.0.0.1", "-p", tostring(port) }
  for _, a in ipairs(args or {}) do argv[#argv + 1] = a end
  argv[#argv + 1] = "PING"
  local code, out, err = processes.run(argv, { timeout = 10 })
  if code == 0 and helper.trim(out) == "PONG" then return "PONG" end
  return nil, out .. err
end

-- `openssl s_client` to 127.0.0.1:port as luastream connects: the test CA,
-- the client certificate, the IP address checked. Exit code, all it printed.
local function s_client(port, c)
  local code, out, err = processes.run({ "openssl", "s_client", "-connect", "127.0.0.1:" .. port,
    "-CAfile", c.ca.cert, "-cert", c.client.cert, "-key", c.client.key, "-verify_ip", "127.0.0.1",
    "-verify_return_error", "-brief" }, { timeout = 10 })
  return code, out .. err
end

describe("the TLS test fixtures", function()
  after_each(helper.cleanup)

  it("make certificates that verify, or fail to, as their names say", function()
    local c = tls.redis_certs()
    local ca = { "-CAfile", c.ca.cert }
    for _, name in ipairs { "server", "client", "peer", "wrong_name" } do
      local ok, out = verify(ca, c[name].cert)
      assert(ok, name .. ": " .. out)
    end
    -- the server certificate names 127.0.0.1 and localhost; wrong_name neither
    assert(verify({ "-CAfile", c.ca.cert, "-purpose", "sslserver", "-verify_ip", "127.0.0.1" }, c.server.cert))
    assert(verify({ "-CAfile", c.ca.cert, "-purpose", "sslserver", "-verify_hostname", "localhost" }, c.server.cert))
    local ok, out = verify({ "-CAfile", c.ca.cert, "-verify_ip", "127.0.0.1" }, c.wrong_name.cert)
    assert(not ok and out:find("mismatch", 1, true), out)
    assert(verify({ "-CAfile", c.ca.cert, "-verify_hostname", "wrong.example" }, c.wrong_name.cert))
    -- client certificates are for clients only
    assert(verify({ "-CAfile", c.ca.cert, "-purpose", "sslclient" }, c.client.cert))
    ok, out = verify({ "-CAfile", c.ca.cert, "-purpose", "sslserver" }, c.client.cert)
    assert(not ok, out)
    -- expired, and only that
    assert.is_true(tls.expires_within(c.expired.cert, 0))
    assert.is_false(tls.expires_within(c.server.cert, 19 * 86400))
    ok, out = verify(ca, c.expired.cert)
    assert(not ok and out:find("certificate has expired", 1, true), out)
    assert(verify({ "-CAfile", c.ca.cert, "-no_check_time" }, c.expired.cert))
    -- the unknown CA: its certificate is not trusted by the test CA
    ok, out = verify(ca, c.other_server.cert)
    assert(not ok and out:find("unable to get local issuer certificate", 1, true), out)
    assert(verify({ "-CAfile", c.other_ca.cert }, c.other_server.cert))
    -- keys are private; the encrypted one opens with its password only
    for _, path in ipairs { c.client.key, c.client.key_enc, c.server.key, c.client.password_file } do
      assert.equal("600", mode(path), path)
    end
    local code = processes.run({ "openssl", "pkey", "-in", c.client.key_enc, "-noout", "-passin",
      "file:" .. c.client.password_file })
    assert.equal(0, code)
    code = processes.run({ "openssl", "pkey", "-in", c.client.key_enc, "-noout", "-passin", "pass:wrong" })
    assert.is_not.equal(0, code)
    -- a rotated client certificate is another one from the same CA
    local r = c:rotated_client()
    assert(verify({ "-CAfile", c.ca.cert, "-purpose", "sslclient" }, r.cert))
    assert.is_not.equal(helper.read_file(c.client.cert), helper.read_file(r.cert))
  end)

  it("start Redis on a TLS port only, asking for client certificates as told", function()
    local c = tls.redis_certs()
    local srv = helper.redis_start({ tls = tls.server_opts(c) })
    assert.equal(string.format("rediss://127.0.0.1:%d", srv.port), srv.url)
    local trust = { "--tls", "--cacert", c.ca.cert }
    assert.equal("PONG", ping(srv.port, { "--tls", "--cacert", c.ca.cert, "--cert", c.client.cert, "--key", c.client.key }))
    assert.is_nil(ping(srv.port, trust), "no client certificate, yet answered")
    assert.is_nil(ping(srv.port), "plaintext answered on the TLS port")
    assert.is_nil(ping(srv.port, { "--tls", "--cacert", c.other_ca.cert, "--cert", c.client.cert, "--key", c.client.key }),
      "the unknown CA's client trusted the server")
    assert.equal("0", srv:cli("CONFIG", "GET", "port"):match("port\n(%d+)"))

    local open = helper.redis_start({ tls = tls.server_opts(c, { auth_clients = "no" }) })
    assert.equal("PONG", ping(open.port, trust))

    -- the certificates to be refused are served, each with what checks it
    local other = helper.redis_start({ tls = tls.server_opts(c,
      { cert = c.other_server.cert, key = c.other_server.key, cli_ca = c.other_ca.cert }) })
    assert.is_nil(ping(other.port, { "--tls", "--cacert", c.ca.cert, "--cert", c.client.cert, "--key", c.client.key }))
    local expired = helper.redis_start({ tls = tls.server_opts(c, { cert = c.expired.cert, key = c.expired.key, insecure = true }) })
    assert.equal("PONG", expired:cli("PING"))
    local code, text = s_client(expired.port, c)
    assert(code ~= 0 and text:find("certificate has expired", 1, true), text)
    local wrong = helper.redis_start({ tls = tls.server_opts(c, { cert = c.wrong_name.cert, key = c.wrong_name.key }) })
    -- (redis-cli checks no host name: it answers; openssl checks it)
    assert.equal("PONG", wrong:cli("PING"))
    code, text = s_client(wrong.port, c)
    assert(code ~= 0 and text:find("IP address mismatch", 1, true), text)
    code, text = s_client(srv.port, c)
    assert(code == 0 and text:find("Verification: OK", 1, true), text)
    -- restart serves other files: what the rotation and /readyz specs do
    srv.tls.cert, srv.tls.key, srv.tls.cli_ca = c.other_server.cert, c.other_server.key, c.other_ca.cert
    srv:restart()
    assert.is_nil(ping(srv.port, { "--tls", "--cacert", c.ca.cert, "--cert", c.client.cert, "--key", c.client.key }))
    assert.equal("PONG", srv:cli("PING"))
  end)

  it("make a cluster over TLS (tls-cluster yes: TLS ports announced) and one announcing plaintext ports", function()
    local c = tls.redis_certs()
    local secure = cluster.start({ masters = 3, tls = tls.server_opts(c, { cluster = true, replication = true }) })
    local ports = {}
    for _, n in ipairs(secure.nodes) do ports[n.port] = true end
    for _, r in ipairs(assert(secure.nodes[1]:call("CLUSTER", "SLOTS"))) do
      assert(ports[r[3][2]], "slot range announced on port " .. r[3][2] .. ", not a TLS port")
      assert.is_nil(ping(r[3][2]), "plaintext answered on " .. r[3][2])
    end
    assert.matches("OK", secure:run({ { "SET", "a", "1" }, { "SET", "b", "2" } }), 1, true)

    local mixed = cluster.start({ masters = 3, tls = tls.server_opts(c, { plain_port = true }) })
    assert.matches("^rediss://", mixed.tls_url)
    local tls_args = { "--tls", "--cacert", c.ca.cert, "--cert", c.client.cert, "--key", c.client.key }
    local argv = { "redis-cli", "-p", tostring(mixed.nodes[1].tls_port) }
    for _, a in ipairs(tls_args) do argv[#argv + 1] = a end
    for _, a in ipairs { "--json", "CLUSTER", "SLOTS" } do argv[#argv + 1] = a end
    local code, out, err = processes.run(argv, { timeout = 10 })
    assert.equal(0, code, out .. err)
    local plain = {}
    for _, n in ipairs(mixed.nodes) do plain[n.port] = true end
    for _, r in ipairs(require("cjson").decode(out)) do
      assert(plain[r[3][2]], "asked over TLS, the node announces port " .. r[3][2] .. ", not a plaintext one")
    end
  end)
end)
