-- cluster: a private Redis Cluster on free loopback ports (masters, and
-- replicas where a spec fails a master over), made with `redis-cli --cluster
-- create`, with a node timeout short enough for a failover in seconds. Each
-- node is a redis.lua Server, registered like those of redis.redis_start, so
-- helper.cleanup() stops them even when a spec fails.
local files = require "tests.integration.support.files"
local processes = require "tests.integration.support.processes"
local ports = require "tests.integration.support.ports"
local redis = require "tests.integration.support.redis"

local cluster = {}

local Cluster = {}
Cluster.__index = Cluster

local NODE_TIMEOUT_MS = 1000

-- A node on a free port whose cluster bus port (port + 10000) is free too;
-- tls: redis_start's opts.tls, copied for each node.
local function start_node(tls)
  local last_err
  for _ = 1, 8 do
    local port = ports.free_port()
    if port + 10000 < 65536 and not ports.port_open(port + 10000) then
      local dir = files.tmpdir("cluster-node")
      local t
      if tls then
        t = {}
        for k, v in pairs(tls) do t[k] = v end
      end
      local ok, srv = pcall(redis.redis_start, {
        port = port, dir = dir, tls = t,
        args = { "--cluster-enabled", "yes", "--cluster-config-file", dir .. "/nodes.conf",
                 "--cluster-node-timeout", tostring(NODE_TIMEOUT_MS),
                 -- a replica may take over however long it was cut off
                 "--cluster-replica-validity-factor", "0" },
      })
      if ok then return srv end
      last_err = srv
    end
  end
  error("cannot start a cluster node: " .. tostring(last_err), 3)
end

--[[ Starts opts.masters masters (default 3) and opts.replicas replicas per
master (default 0), joins them and waits until every node reports
cluster_state:ok with all slots covered. opts.tls: every node a TLS server
(redis_start's opts.tls; cluster = true for `tls-cluster yes`, where the bus
and the ports the nodes announce are TLS; plain_port = true with cluster
unset for TLS client ports beside plaintext ones that the nodes announce).
Returns a cluster: c.nodes (Servers, masters first as redis-cli assigns
them), c.url (the first node's), c.tls_url (its TLS port's). ]]
function cluster.start(opts)
  opts = opts or {}
  local masters, replicas = opts.masters or 3, opts.replicas or 0
  local c = setmetatable({ nodes = {} }, Cluster)
  for i = 1, masters * (1 + replicas) do c.nodes[i] = start_node(opts.tls) end
  local argv = { "redis-cli", "--cluster", "create" }
  for _, a in ipairs(redis.cli_tls_args(opts.tls)) do argv[#argv + 1] = a end
  for _, n in ipairs(c.nodes) do argv[#argv + 1] = "127.0.0.1:" .. n.port end
  for _, a in ipairs { "--cluster-replicas", tostring(replicas), "--cluster-yes" } do
    argv[#argv + 1] = a
  end
  local code, out, err = processes.run(argv, { timeout = 60 })
  if code ~= 0 then error("redis-cli --cluster create failed: " .. out .. err, 2) end
  c.url, c.tls_url = c.nodes[1].url, c.nodes[1].tls_url
  c:wait_ok(30)
  return c
end

-- Nodes that are alive.
function Cluster:alive_nodes()
  local out = {}
  for _, n in ipairs(self.nodes) do
    if n:alive() then out[#out + 1] = n end
  end
  return out
end

--- Waits until every live node says cluster_state:ok and they agree on who
--- serves every slot.
function Cluster:wait_ok(timeout_s)
  processes.wait_until(function()
    local seen
    for _, n in ipairs(self:alive_nodes()) do
      local info = n:cli("CLUSTER", "INFO")
      if not info:find("cluster_state:ok", 1, true) then return false, n.port .. " not ok" end
      local map = self:slot_owners(n)
      if seen and seen ~= map then return false, "nodes disagree on the slot map" end
      seen = map
    end
    return true
  end, timeout_s, "every cluster node reports cluster_state:ok")
end

-- "start-end:port ..." of node n's CLUSTER SLOTS, sorted: to compare nodes.
function Cluster:slot_owners(n)
  local parts = {}
  for _, r in ipairs(assert(n:call("CLUSTER", "SLOTS"))) do
    parts[#parts + 1] = string.format("%d-%d:%d", r[1], r[2], r[3][2])
  end
  table.sort(parts)
  return table.concat(parts, " ")
end

--- The live master serving key's slot, as a Server.
function Cluster:master_of(key)
  local any = self:alive_nodes()[1]
  local slot = tonumber(any:cli("CLUSTER", "KEYSLOT", key))
  for _, r in ipairs(assert(any:call("CLUSTER", "SLOTS"))) do
    if slot >= r[1] and slot <= r[2] then
      for _, n in ipairs(self.nodes) do
        if n.port == r[3][2] then return n, slot end
      end
    end
  end
  error("no master serves slot " .. slot)
end

--- A node's id (CLUSTER MYID).
function Cluster:id_of(n) return n:cli("CLUSTER", "MYID") end

--- Runs commands (a list of argv lists) through `redis-cli -c`, which follows
--- MOVED and ASK, one after the other; returns the output. Arguments are
--- single-quoted, so JSON passes as it is.
function Cluster:run(commands)
  local lines = {}
  for i, cmd in ipairs(commands) do
    local args = {}
    for j, a in ipairs(cmd) do args[j] = "'" .. tostring(a):gsub("\\", "\\\\"):gsub("'", "\\'") .. "'" end
    lines[i] = table.concat(args, " ")
  end
  local node = self:alive_nodes()[1]
  local code, out, err = processes.run(node:_cli_argv { "-c" },
    { stdin = table.concat(lines, "\n") .. "\n", timeout = 120 })
  if code ~= 0 then error("redis-cli -c failed: " .. out .. err, 2) end
  return out
end

--- One command's reply, decoded, from the master of its key (arg 2).
function Cluster:call(...)
  local key = select(2, ...)
  return self:master_of(key):call(...)
end

return cluster
