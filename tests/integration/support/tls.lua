-- tls: a throwaway test CA and a server certificate for 127.0.0.1 and
-- localhost, made with the openssl command line, for the specs' HTTPS servers.
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
end

-- EC P-256 keys: fast to make, and every TLS client accepts them.
local NEW_KEY = { "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes" }

local function with(list, more)
  local out = {}
  for _, a in ipairs(list) do out[#out + 1] = a end
  for _, a in ipairs(more) do out[#out + 1] = a end
  return out
end

--[[ Makes a test CA and a server certificate signed by it in dir (a fresh temp
folder when nil), valid for 2 days, for IP:127.0.0.1 and DNS:localhost.
Returns {dir =, ca_file = "DIR/ca.pem", cert_file = "DIR/server.pem",
key_file = "DIR/server.key"}. Errors clearly when openssl is missing. ]]
function tls.make_certs(dir)
  if not sys.on_path("openssl") then
    error("openssl is not on PATH: the HTTPS tests make their own test CA with it "
      .. "(install it, e.g. apt-get install openssl)", 2)
  end
  dir = dir or files.tmpdir("tls")
  local ca_key, ca_file = dir .. "/ca.key", dir .. "/ca.pem"
  local key_file, csr, cert_file = dir .. "/server.key", dir .. "/server.csr", dir .. "/server.pem"
  local ext = dir .. "/server.ext"
  openssl(with({ "req", "-x509", "-new" }, with(NEW_KEY, {
    "-keyout", ca_key, "-out", ca_file, "-days", "2", "-sha256",
    "-subj", "/CN=luastream test CA",
    "-addext", "basicConstraints=critical,CA:TRUE",
    "-addext", "keyUsage=critical,keyCertSign,cRLSign",
  })))
  openssl(with({ "req", "-new" }, with(NEW_KEY, {
    "-keyout", key_file, "-out", csr, "-subj", "/CN=localhost",
  })))
  files.write_file(ext, table.concat({
    "subjectAltName=IP:127.0.0.1,DNS:localhost",
    "basicConstraints=critical,CA:FALSE",
    "keyUsage=critical,digitalSignature",
    "extendedKeyUsage=serverAuth",
  }, "\n") .. "\n")
  openssl({
    "x509", "-req", "-in", csr, "-CA", ca_file, "-CAkey", ca_key,
    "-set_serial", tostring(os.time()), "-days", "2", "-sha256",
    "-extfile", ext, "-out", cert_file,
  })
  return { dir = dir, ca_file = ca_file, cert_file = cert_file, key_file = key_file }
end

return tls
