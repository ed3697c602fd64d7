-- sentinels: a master, a replica and three Redis Sentinels watching them, on
-- free loopback ports, with timeouts short enough for a failover in seconds.
-- Every server is registered like those of redis.redis_start, so
-- helper.cleanup() stops them even when a spec fails.
local files = require "tests.integration.support.files"
local processes = require "tests.integration.support.processes"
local ports = require "tests.integration.support.ports"
local redis = require "tests.integration.support.redis"
local registry = require "tests.integration.support.registry"

local sentinels = {}

local Set = {}
Set.__index = Set

-- A sentinel on a free port; a Server (redis.lua) so :call, :cli and :kill work.
local function start_sentinel(service, master_port, opts)
  local last_err
  for _ = 1, 8 do
    local port = ports.free_port()
    local dir = files.tmpdir("sentinel")
    local conf = dir .. "/sentinel.conf"
    local t = opts.tls
    local listen = { "port " .. port }
    if t then
      -- TLS only, to clients, to the other sentinels and to the servers
      listen = { "port 0", "tls-port " .. port, "tls-cert-file " .. t.cert, "tls-key-file " .. t.key,
        "tls-ca-cert-file " .. t.ca, "tls-auth-clients " .. (t.auth_clients or "yes"), "tls-replication yes" }
      if t.client_cert then
        listen[#listen + 1] = "tls-client-cert-file " .. t.client_cert
        listen[#listen + 1] = "tls-client-key-file " .. t.client_key
      end
    end
    files.write_file(conf, table.concat({
      table.concat(listen, "\n"),
      "bind 127.0.0.1",
      "daemonize no",
      "dir " .. dir,
      "logfile " .. dir .. "/redis.log",
      string.format("sentinel monitor %s 127.0.0.1 %d 2", service, master_port),
      string.format("sentinel down-after-milliseconds %s %d", service, opts.down_after_ms),
      string.format("sentinel failover-timeout %s %d", service, opts.failover_timeout_ms),
      string.format("sentinel parallel-syncs %s 1", service),
      "",
    }, "\n"))
    local srv = setmetatable({ port = port, dir = dir, opts = {}, tls = t }, redis.Server)
    srv.proc = processes.spawn({ "redis-server", conf, "--sentinel" },
      { pdeathsig = true, stdout = dir .. "/redis.stdout", stderr = "stdout" })
    local ok = pcall(processes.wait_until, function()
      if not srv.proc:alive() then return true end
      if not ports.port_open(port) then return false end
      local code, out = processes.run(srv:_cli_argv { "PING" }, { timeout = 10 })
      return code == 0 and files.trim(out) == "PONG"
    end, 15, "sentinel answering PING")
    if ok and srv.proc:alive() then
      registry.servers[#registry.servers + 1] = srv
      return srv
    end
    srv.proc:kill("KILL")
    srv.proc:wait(5)
    last_err = files.tail(files.read_file(dir .. "/redis.stdout") ..
      (files.file_exists(dir .. "/redis.log") and files.read_file(dir .. "/redis.log") or ""), 15)
    if not last_err:find("in use", 1, true) then break end
  end
  error("cannot start a sentinel: " .. tostring(last_err), 3)
end

--[[ Starts the master, one replica (replicaof the master, in sync) and three
sentinels that know both and each other. opts: service (default
"mymaster"), down_after_ms (1000), failover_timeout_ms (3000), master (the
master's redis_start options), tls (redis_start's opts.tls: the master,
the replica and the sentinels speak only TLS, replication included). Returns a
set: set.master, set.replica, set.sentinels, set.service, set.url (the
redis+sentinel:// URL, rediss+sentinel:// with tls). ]]
function sentinels.start(opts)
  opts = opts or {}
  redis.require_server()
  local service = opts.service or "mymaster"
  local function tls_copy()
    if not opts.tls then return nil end
    local t = { replication = true }
    for k, v in pairs(opts.tls) do t[k] = v end
    return t
  end
  local master_opts = {}
  for k, v in pairs(opts.master or {}) do master_opts[k] = v end
  master_opts.tls = master_opts.tls or tls_copy()
  local master = redis.redis_start(master_opts)
  local replica = redis.redis_start({ tls = tls_copy(), args = { "--replicaof", "127.0.0.1", tostring(master.port) } })
  processes.wait_until(function()
    local info = replica:cli("INFO", "replication")
    return info:find("master_link_status:up", 1, true) ~= nil, info
  end, 30, "the replica in sync with the master")
  local set = setmetatable({ master = master, replica = replica, sentinels = {}, service = service }, Set)
  local addrs = {}
  for i = 1, 3 do
    set.sentinels[i] = start_sentinel(service, master.port, {
      down_after_ms = opts.down_after_ms or 1000,
      failover_timeout_ms = opts.failover_timeout_ms or 3000,
      tls = opts.tls,
    })
    addrs[i] = "127.0.0.1:" .. set.sentinels[i].port
  end
  set.url = string.format("%s://%s/%s", opts.tls and "rediss+sentinel" or "redis+sentinel",
    table.concat(addrs, ","), service)
  -- Every sentinel sees the replica and the two others: a failover can be agreed.
  processes.wait_until(function()
    for _, s in ipairs(set.sentinels) do
      local m = s:call("SENTINEL", "MASTER", service)
      if not m or tonumber(m["num-slaves"]) ~= 1 or tonumber(m["num-other-sentinels"]) ~= 2 then
        return false, "a sentinel does not see the whole set yet"
      end
    end
    return true
  end, 30, "the sentinels discovering the replica and each other")
  return set
end

--- The port every running sentinel now gives for the master, or nil while they differ.
function Set:master_port()
  local port
  for _, s in ipairs(self.sentinels) do
    if s:alive() then
      local a = s:call("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service)
      local p = a and tonumber(a[2])
      if port and p ~= port then return nil end
      port = p
    end
  end
  return port
end

--- Waits until every sentinel names `server` as the master and it says so itself.
function Set:wait_master(server, timeout_s)
  processes.wait_until(function()
    local p = self:master_port()
    -- a promotion ends the new master's client connections (CLIENT KILL
    -- from the sentinel): a reset here means "ask again"
    local ok, role = pcall(server.call, server, "ROLE")
    if not ok then role = nil end
    return p == server.port and role and role[1] == "master",
      string.format("sentinels say port %s, %d says %s", tostring(p), server.port, role and role[1] or "?")
  end, timeout_s or 30, "the sentinels agreeing on the new master")
end

sentinels.Set = Set
return sentinels
