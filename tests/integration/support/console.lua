-- console: the web console of `luastream run --console` and `luastream
-- console` seen over HTTP: a tokens file, a console started with one, and a
-- client that logs in (or sends a bearer token) and checks the headers every
-- answer must carry.
local cjson = require "cjson"
local files = require "tests.integration.support.files"
local hosts = require "tests.integration.support.hosts"
local http = require "tests.integration.support.http"

local console = {}

-- Two tokens (32 hex digits and 22 base64 characters: the shortest allowed).
console.ALICE = "3f9a0c41d2e87b65a1c0ffee12345678"
console.BOB = "Qm9iJ3MtdG9rZW4tMTIzNA"

--- A tokens file holding text, chmod mode (default 600); returns its path.
function console.tokens_file(text, mode)
  local path = files.tmpdir("tokens") .. "/tokens"
  files.write_file(path, text or ("alice " .. console.ALICE .. "\nbob " .. console.BOB .. "\n"))
  assert(os.execute("chmod " .. (mode or "600") .. " " .. files.shell_quote(path)))
  return path
end

--[[ Starts a console: `luastream run --console 127.0.0.1:0 ...` DIR (opts.dir)
or, with opts.command = "console", the standalone one on opts.dir (a DIR, or
a list of stream names). opts.args: more arguments; opts.server the Redis;
opts.env. Returns the host with h.port (the console's), h.tokens. ]]
function console.start(opts)
  local tokens = opts.tokens or console.tokens_file()
  local args = { "--console", "127.0.0.1:0", "--console-tokens", tokens }
  for _, a in ipairs(opts.args or {}) do args[#args + 1] = a end
  local h = hosts.host_start(args, {
    command = opts.command, dir = opts.dir, server = opts.server, url = opts.url, env = opts.env,
  })
  local rec = h:wait_records({ msg = "console listening" }, 1, 20, "the console listening")[1]
  h.port = assert(tonumber(rec.port), rec._line)
  h.tokens = tokens
  return h
end

-- Every answer of the console carries these, and never a CORS grant.
local function check_headers(res, what)
  local csp = res.headers["content-security-policy"]
  assert(csp, what .. ": no Content-Security-Policy:\n" .. res.text)
  assert(csp:find("frame-ancestors 'none'", 1, true), what .. ": CSP without frame-ancestors 'none': " .. csp)
  assert(csp:find("default-src 'none'", 1, true), what .. ": CSP without default-src 'none': " .. csp)
  assert(not csp:find("unsafe-inline", 1, true), what .. ": CSP allows unsafe-inline: " .. csp)
  assert(not csp:find("unsafe-eval", 1, true), what .. ": CSP allows unsafe-eval: " .. csp)
  assert(res.headers["x-content-type-options"] == "nosniff", what .. ": no X-Content-Type-Options: nosniff")
  assert(res.headers["referrer-policy"] == "no-referrer", what .. ": no Referrer-Policy: no-referrer")
  for _, h in ipairs(res.header_list) do
    assert(not h[1]:find("^access%-control%-"), what .. ": a CORS header: " .. h[1] .. ": " .. h[2])
  end
end
console.check_headers = check_headers

local Client = {}
Client.__index = Client

--[[ A client of the console on port: host (the Host header, default
127.0.0.1:PORT), origin (sent on POSTs; default http://HOST; false: none),
bearer (a token for Authorization). ]]
function console.client(port, opts)
  opts = opts or {}
  local host = opts.host or ("127.0.0.1:" .. port)
  local origin = opts.origin
  if origin == nil then origin = "http://" .. host end
  return setmetatable({ port = port, host = host, origin = origin, bearer = opts.bearer, cookie = nil,
    csrf = nil, seen = {} }, Client)
end

--[[ One request: method, path, opts {body = string or a list of {name,
value} (form-encoded), headers = more {name, value}, origin = override
(false: none), csrf = override (false: none), cookie = override (false:
none), bearer = override (false: none), host = override}. Checks the common
headers; returns the response, with res.json decoded when it is JSON. ]]
function Client:request(method, path, opts)
  opts = opts or {}
  local headers = {}
  local function add(name, v) headers[#headers + 1] = { name, v } end
  local bearer = opts.bearer
  if bearer == nil then bearer = self.bearer end
  if bearer then add("Authorization", "Bearer " .. bearer) end
  local cookie = opts.cookie
  if cookie == nil then cookie = self.cookie and ("luastream_session=" .. self.cookie) end
  if cookie then add("Cookie", cookie) end
  local origin = opts.origin
  if origin == nil and method == "POST" then origin = self.origin end
  if origin then add("Origin", origin) end
  local csrf = opts.csrf
  if csrf == nil and method == "POST" then csrf = self.csrf end
  if csrf then add("X-CSRF-Token", csrf) end
  local body = opts.body
  if type(body) == "table" then body = console.form(body) end
  if body then add("Content-Type", "application/x-www-form-urlencoded") end
  for _, h in ipairs(opts.headers or {}) do add(h[1], h[2]) end
  local res = assert(http.request(self.port, { method = method, path = path, host = opts.host or self.host,
    headers = headers, body = body }))
  local what = method .. " " .. path .. " (" .. res.status .. ")"
  check_headers(res, what)
  self.seen[#self.seen + 1] = res
  if (res.headers["content-type"] or ""):find("^application/json") then
    local ok, v = pcall(cjson.decode, res.body)
    assert(ok, what .. ": the body is not JSON: " .. tostring(v) .. "\n" .. res.body)
    res.json = v
  end
  return res
end

function Client:get(path, opts) return self:request("GET", path, opts) end
function Client:post(path, body, opts)
  opts = opts or {}
  opts.body = body or ""
  return self:request("POST", path, opts)
end

--- GET path expecting 200 JSON; returns the document.
function Client:json(path)
  local res = self:get(path)
  assert(res.status == 200 and res.json, "GET " .. path .. ": " .. res.status .. " " .. res.body)
  return res.json
end

--- POST a form expecting 200 JSON; returns the document.
function Client:post_json(path, body)
  local res = self:post(path, body)
  assert(res.status == 200 and res.json, "POST " .. path .. ": " .. res.status .. " " .. res.body)
  return res.json
end

--- Logs in with token (POST /login, then /api/session for the CSRF token).
function Client:login(token)
  local res = self:post("/login", { { "token", token } }, { csrf = false, cookie = false })
  assert(res.status == 303, "login: " .. res.status .. " " .. res.text)
  local set = res.headers["set-cookie"] or ""
  self.cookie = assert(set:match("^luastream_session=(%x+);"), "login: no session cookie: " .. res.text)
  self.set_cookie = set
  self.location = res.headers.location
  self.csrf = self:json("/api/session").csrf
  return res
end

--- Every Location and Set-Cookie this client was sent, and the bodies.
function Client:everything_seen()
  local out = {}
  for _, r in ipairs(self.seen) do out[#out + 1] = r.text end
  return table.concat(out, "\n")
end

--- A form body from {name, value} pairs.
function console.form(pairs_)
  local out = {}
  for _, p in ipairs(pairs_) do out[#out + 1] = console.escape(p[1]) .. "=" .. console.escape(p[2]) end
  return table.concat(out, "&")
end

--- Percent-encodes every byte but the unreserved ones.
function console.escape(s)
  return (tostring(s):gsub("[^%w%-%._~]", function(c) return string.format("%%%02X", c:byte()) end))
end

return console
