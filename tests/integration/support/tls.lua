-- tls: throwaway test CAs and certificates made with the openssl command line:
-- a server certificate for the specs' HTTPS servers (make_certs), and the set
-- the Redis TLS specs need (redis_certs): server and client certificates, an
-- encrypted client key, and certificates that must be refused (expired, a
-- wrong host name, an unknown CA).
local sys = require "tests.integration.support.sys"
local files = require "tests.integration.support.files"
local processes = require "tests.integration.support.processes"

local tls = {}

-- Runs openssl with args; errors with its output when it fails.
local function openssl(args)
  local argv = { "openssl" }
  for _, a in ipairs(args) do argv[#argv + 1] = a end
  local code, out, err = processes.run(argv, { timeout = 30 })
  if code ~= 0 then
    error(string.format("openssl %s failed (%d):\n%s%s", args[1], code, out, err), 3)
  end
  return out
end

-- EC P-256 keys: fast to make, and every TLS client accepts them.
local NEW_KEY = { "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes" }

local function with(list, more)
  local out = {}
  for _, a in ipairs(list) do out[#out + 1] = a end
  for _, a in ipairs(more) do out[#out + 1] = a end
  return out
end

local function require_openssl()
  if not sys.on_path("openssl") then
    error("openssl is not on PATH: the TLS tests make their own test CA with it "
      .. "(install it, e.g. apt-get install openssl)", 3)
  end
end

-- Private keys are for their owner only (luastream refuses others).
local function private(path)
  assert(sys.C.chmod(path, tonumber("600", 8)) == 0, "chmod 600 " .. path)
end

local serial = 0
local function next_serial()
  serial = serial + 1
  return tostring(os.time() * 1000 + serial)
end

--[[ Makes a self-signed test CA named name (the CN) in dir, files
DIR/BASE.pem and DIR/BASE.key (base defaults to "ca"), valid for opts.days
(default 30). Returns {dir =, cert =, key =, name =}. ]]
function tls.make_ca(dir, base, name, opts)
  require_openssl()
  opts = opts or {}
  base = base or "ca"
  local ca = { dir = dir, cert = dir .. "/" .. base .. ".pem", key = dir .. "/" .. base .. ".key",
    name = name or ("luastream test CA " .. base) }
  openssl(with({ "req", "-x509", "-new" }, with(NEW_KEY, {
    "-keyout", ca.key, "-out", ca.cert, "-days", tostring(opts.days or 30), "-sha256",
    "-set_serial", next_serial(),
    "-subj", "/CN=" .. ca.name,
    "-addext", "basicConstraints=critical,CA:TRUE",
    "-addext", "keyUsage=critical,keyCertSign,cRLSign",
  })))
  private(ca.key)
  return ca
end

-- "YYYYMMDDHHMMSSZ" (UTC) for `openssl ca -startdate/-enddate`.
local function ca_time(t) return os.date("!%Y%m%d%H%M%SZ", t) end

--[[ Issues a certificate signed by ca into ca.dir: BASE.pem and BASE.key
(mode 600). opts: cn (default "localhost"), san (default
"IP:127.0.0.1,DNS:localhost"; false for none), usage ("server" (default),
"client" or "both": the extendedKeyUsage), days (default 30), expired (true:
valid from 10 days ago until 1 day ago, made with `openssl ca`, which takes
explicit dates), password (also writes BASE.enc.key, the key encrypted with it,
and BASE.password, the password file). Returns {cert =, key =, key_enc =,
password_file =, expired_on = (expired: "YYYY-MM-DD", UTC)}. ]]
function tls.issue(ca, base, opts)
  require_openssl()
  opts = opts or {}
  local dir = ca.dir
  local cert, key, csr = dir .. "/" .. base .. ".pem", dir .. "/" .. base .. ".key", dir .. "/" .. base .. ".csr"
  openssl(with({ "req", "-new" }, with(NEW_KEY, {
    "-keyout", key, "-out", csr, "-subj", "/CN=" .. (opts.cn or "localhost"),
  })))
  private(key)
  local eku = ({ server = "serverAuth", client = "clientAuth", both = "serverAuth,clientAuth" })[opts.usage or "server"]
  assert(eku, "tls.issue: usage is server, client or both")
  local ext = {
    "basicConstraints=critical,CA:FALSE",
    "keyUsage=critical,digitalSignature",
    "extendedKeyUsage=" .. eku,
  }
  local san = opts.san
  if san == nil then san = "IP:127.0.0.1,DNS:localhost" end
  if san then ext[#ext + 1] = "subjectAltName=" .. san end
  local expired_on
  if opts.expired then
    -- x509 -req only counts days from now; `openssl ca` takes both dates.
    local now = os.time()
    local db = dir .. "/" .. base .. ".db"
    os.execute("mkdir -p " .. files.shell_quote(db))
    files.write_file(db .. "/index.txt", "")
    files.write_file(db .. "/serial", string.format("%X\n", os.time()))
    files.write_file(db .. "/ca.cnf", table.concat({
      "[ca]", "default_ca = test_ca",
      "[test_ca]", "database = " .. db .. "/index.txt", "new_certs_dir = " .. db,
      "serial = " .. db .. "/serial", "default_md = sha256", "policy = any",
      "unique_subject = no", "copy_extensions = none",
      "[any]", "commonName = supplied",
      "[ext]", table.concat(ext, "\n"),
    }, "\n") .. "\n")
    openssl({
      "ca", "-batch", "-config", db .. "/ca.cnf", "-cert", ca.cert, "-keyfile", ca.key,
      "-in", csr, "-out", cert, "-notext", "-extensions", "ext",
      "-startdate", ca_time(now - 10 * 86400), "-enddate", ca_time(now - 86400),
    })
    expired_on = os.date("!%Y-%m-%d", now - 86400)
  else
    local extfile = dir .. "/" .. base .. ".ext"
    files.write_file(extfile, table.concat(ext, "\n") .. "\n")
    openssl({
      "x509", "-req", "-in", csr, "-CA", ca.cert, "-CAkey", ca.key,
      "-set_serial", next_serial(), "-days", tostring(opts.days or 30), "-sha256",
      "-extfile", extfile, "-out", cert,
    })
  end
  local out = { cert = cert, key = key, expired_on = expired_on }
  if opts.password then
    out.password_file = dir .. "/" .. base .. ".password"
    files.write_file(out.password_file, opts.password .. "\n")
    private(out.password_file)
    out.key_enc = dir .. "/" .. base .. ".enc.key"
    openssl({ "pkey", "-in", key, "-aes256", "-passout", "file:" .. out.password_file, "-out", out.key_enc })
    private(out.key_enc)
  end
  return out
end

--- Does the certificate at path expire within `seconds` (0: is it expired)?
function tls.expires_within(path, seconds)
  local code = processes.run({ "openssl", "x509", "-in", path, "-noout", "-checkend", tostring(seconds or 0) },
    { timeout = 30 })
  return code ~= 0
end

--- The certificate's notAfter as openssl prints it.
function tls.not_after(path)
  return files.trim(openssl({ "x509", "-in", path, "-noout", "-enddate" })):match("^notAfter=(.*)$")
end

--[[ Everything the Redis TLS specs need, in dir (a fresh temp folder when
nil):
  ca                       the test CA (ca.cert: what --tls-ca trusts)
  server                   IP:127.0.0.1 and DNS:localhost, 20 days
  client                   extendedKeyUsage=clientAuth, 10 days; its key also
                           encrypted (client.key_enc, client.password_file)
  peer                     the servers' own client certificate (replication,
                           cluster bus, sentinels), clientAuth
  expired                  a server certificate that expired yesterday
  wrong_name               a server certificate naming only DNS:wrong.example
  other_ca, other_server   an unknown CA and a server certificate it signed
Each certificate is {cert =, key =}. certs:rotated_client(base, ca) issues
another client certificate (from ca, default the test CA). ]]
function tls.redis_certs(dir)
  require_openssl()
  dir = dir or files.tmpdir("tls")
  local set = { dir = dir }
  set.ca = tls.make_ca(dir, "ca", "luastream test CA")
  set.server = tls.issue(set.ca, "server", { days = 20 })
  set.client = tls.issue(set.ca, "client", { cn = "luastream", usage = "client", days = 10, password = "k3y-pass" })
  set.peer = tls.issue(set.ca, "peer", { cn = "redis peer", usage = "client", days = 30 })
  set.expired = tls.issue(set.ca, "expired", { expired = true })
  set.wrong_name = tls.issue(set.ca, "wrong-name", { cn = "wrong.example", san = "DNS:wrong.example" })
  set.other_ca = tls.make_ca(dir, "other-ca", "luastream unknown CA")
  set.other_server = tls.issue(set.other_ca, "other-server")
  local n = 0
  function set.rotated_client(_, ca)
    n = n + 1
    return tls.issue(ca or set.ca, "client-rotated-" .. n, { cn = "luastream rotated " .. n, usage = "client", days = 5 })
  end
  return set
end

--[[ redis_start's opts.tls for a server of certs (redis_certs): the server
certificate, trusting the test CA, asking clients for a certificate
(auth_clients "yes"), redis-cli and the server's own connections presenting
certs.peer. more: fields that replace these (auth_clients, cluster, ...). ]]
function tls.server_opts(certs, more)
  local t = {
    cert = certs.server.cert, key = certs.server.key, ca = certs.ca.cert,
    client_cert = certs.peer.cert, client_key = certs.peer.key, auth_clients = "yes",
  }
  for k, v in pairs(more or {}) do t[k] = v end
  return t
end

--[[ luastream's options for a TLS connection with certs: --tls-ca (the test
CA) and the client certificate (client, default certs.client) with its key
(--tls-cert, --tls-key). ]]
function tls.client_args(certs, client)
  client = client or certs.client
  return { "--tls-ca", certs.ca.cert, "--tls-cert", client.cert, "--tls-key", client.key }
end

--- A URL query value, percent-encoded (every byte but unreserved ones).
function tls.encode(s)
  return (s:gsub("[^%w%-%._~]", function(c) return string.format("%%%02X", c:byte()) end))
end

--[[ The query string that gives the options of client_args in the URL:
"?tls_ca=...&tls_cert=...&tls_key=...", values percent-encoded. ]]
function tls.url_params(certs, client)
  client = client or certs.client
  return "?tls_ca=" .. tls.encode(certs.ca.cert) .. "&tls_cert=" .. tls.encode(client.cert)
    .. "&tls_key=" .. tls.encode(client.key)
end

--[[ Puts the certificate and key of pair ({cert =, key =}) at cert_path and
key_path (mode 600) as a deploy does: each written beside and renamed over,
so that a reader sees the old file or the new one, never half of one. ]]
function tls.install(pair, cert_path, key_path)
  local function put(from, to, mode)
    files.write_file(to .. ".new", files.read_file(from))
    assert(sys.C.chmod(to .. ".new", tonumber(mode, 8)) == 0, "chmod " .. to)
    assert(os.rename(to .. ".new", to))
  end
  put(pair.cert, cert_path, "644")
  put(pair.key, key_path, "600")
  return { cert = cert_path, key = key_path }
end

--[[ Makes a test CA and a server certificate signed by it in dir (a fresh temp
folder when nil), valid for 2 days, for IP:127.0.0.1 and DNS:localhost.
Returns {dir =, ca_file = "DIR/ca.pem", cert_file = "DIR/server.pem",
key_file = "DIR/server.key"}. Errors clearly when openssl is missing. ]]
function tls.make_certs(dir)
  dir = dir or files.tmpdir("tls")
  local ca = tls.make_ca(dir, "ca", "luastream test CA", { days = 2 })
  local server = tls.issue(ca, "server", { days = 2 })
  return { dir = dir, ca_file = ca.cert, cert_file = server.cert, key_file = server.key }
end

return tls
