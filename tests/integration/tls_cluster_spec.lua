-- Redis Cluster over TLS: with `tls-cluster yes` the nodes announce their TLS
-- ports, and the host, given rediss:// and a client certificate, follows the
-- slot map and its redirects over TLS: the cluster example
-- (handlers/cluster/post_payment.lua, ctx:write with hash-tagged names) posts
-- every payment exactly once through a master's failover. A cluster left at
-- `tls-cluster no` announces plaintext ports; the host refuses it at start,
-- saying what to set.
local helper = require "tests.integration.helper"
local cluster = require "tests.integration.support.cluster"
local ledger = require "tests.integration.support.ledger"
local tls = require "tests.integration.support.tls"

local READY = 'msg="host ready"'
local POSTED = { msg = "payment posted" }
local STREAM = "{payments}"
local EXAMPLE = helper.repo_root .. "/handlers/cluster/post_payment.lua"
local PAYMENTS = 2000
local LEDGER = { stream = STREAM, payments = PAYMENTS }

local luastream = helper.luastream

describe("a Redis Cluster over TLS", function()
  after_each(helper.cleanup)

  it("runs the cluster example over rediss:// and carries on through a failover, every payment posted once #slow", function()
    local certs = tls.redis_certs()
    local c = cluster.start({ masters = 3, replicas = 1, tls = tls.server_opts(certs, { cluster = true, replication = true }) })
    assert.matches("^rediss://", c.url)
    assert(c:call("XGROUP", "CREATE", STREAM, "ledger", "0", "MKSTREAM"))
    c:run(ledger.commands(1, PAYMENTS / 2, LEDGER))
    local master = c:master_of(STREAM)
    -- the entries are on the replica before the master dies
    assert.equal(1, tonumber(master:cli("WAIT", "1", "5000")))

    local dir = helper.handlers_dir({ ["post_payment.lua"] = helper.read_file(EXAMPLE) })
    local host = helper.host_start(tls.client_args(certs), { url = c.url, dir = dir })
    host:wait_log(READY, 30, { plain = true })
    assert.equal(1, host:count { msg = "redis cluster slot map", masters = "3" })
    host:wait_records(POSTED, 50, 30, "the host busy with the backlog")

    local mark = host:mark()
    master:kill()
    helper.wait_until(function()
      -- during the failover a node may name no master for the slot at all
      local ok, now = pcall(c.master_of, c, STREAM)
      if not ok then return false, now end
      return now ~= master and now:alive(), "served by port " .. now.port
    end, 30, "a replica promoted for the stream's slot")
    c:wait_ok(30)
    host:wait_log('msg="redis cluster slot map"', 30, { plain = true, after = mark })
    c:run(ledger.commands(PAYMENTS / 2 + 1, PAYMENTS, LEDGER))

    ledger.wait_posted(c, LEDGER, 90)
    assert.is_true(host:alive())
    assert.equal(0, host:stop())
    ledger.assert_exact(c, LEDGER)
  end)

  it("checks every node's certificate against --tls-server-name when the nodes' certificates do not hold their address", function()
    local certs = tls.redis_certs()
    local named = tls.issue(certs.ca, "server-dns", { san = "DNS:localhost" })
    local c = cluster.start({ masters = 3, tls = tls.server_opts(certs, { cert = named.cert, key = named.key, cluster = true }) })
    local dir = helper.handlers_dir({ ["orders.lua"] = [[
      local ls = require "luastream"
      return {
        stream = "orders", group = "count", start = "beginning", partitions = 8,
        handle = function(order, ctx)
          ctx:write("HINCRBY", "totals:" .. ctx.partition_tag, order.account, order.cents)
          ls.log.info("order counted", { id = order.id })
        end,
      }
    ]] })
    -- by address: the seed node's certificate does not hold 127.0.0.1
    local code, out, err = luastream("run", "--redis", c.url, tls.client_args(certs), dir, { timeout = 20 })
    assert.equal(1, code, out .. err)
    assert.matches("does not match", out .. err, 1, true)
    assert.matches("--tls-server-name", out .. err, 1, true)

    -- by the name they hold: every master, reached from the slot map, is checked against it
    local named_args = tls.client_args(certs)
    named_args[#named_args + 1] = "--tls-server-name"
    named_args[#named_args + 1] = "localhost"
    local host = helper.host_start(named_args, { url = c.url, dir = dir })
    host:wait_log(READY, 30, { plain = true })
    local N, masters = 24, {}
    for id = 1, N do
      local account = "acct-" .. id
      code, out, err = luastream("publish", "--redis", c.url, named_args, "orders",
        string.format('{"id":%d,"account":"%s","cents":1}', id, account), "--key", account, "--partitions", "8")
      assert.equal(0, code, out .. err)
    end
    host:wait_records({ msg = "order counted" }, N, 30, "every order counted")
    for p = 0, 7 do masters[c:master_of("orders:{" .. p .. "}").port] = true end
    local n = 0
    for _ in pairs(masters) do n = n + 1 end
    assert.equal(3, n, "the partitions live on every master")
    assert.equal(0, host:stop())
  end)

  it("refuses a cluster whose nodes announce plaintext ports (tls-cluster no), naming tls-cluster yes", function()
    local certs = tls.redis_certs()
    local c = cluster.start({ masters = 3, tls = tls.server_opts(certs, { plain_port = true }) })
    local dir = helper.handlers_dir({ ["post_payment.lua"] = helper.read_file(EXAMPLE) })
    local t0 = helper.now()
    local code, out, err = luastream("run", "--redis", c.tls_url, tls.client_args(certs), dir, { timeout = 20 })
    local took = helper.now() - t0
    assert.equal(1, code, out .. err)
    assert(took < 8, "took " .. took .. " s")
    assert.matches(c.tls_url, out .. err, 1, true)
    assert.matches("tls-cluster yes", out .. err, 1, true)

    -- publish: the stream's slot is on a node the first one redirects to, at a plaintext port
    assert.is_not.equal(c.nodes[1].port, c:master_of(STREAM).port)
    code, out, err = luastream("publish", "--redis", c.tls_url, tls.client_args(certs), STREAM, '{"id":1}',
      { timeout = 20 })
    assert.is_not.equal(0, code, out .. err)
    assert.matches("tls-cluster yes", out .. err, 1, true)
    assert.equal(0, c:call("EXISTS", STREAM))
    -- (the plaintext ports do answer: it is the cluster's setting that is wrong)
    assert.equal("PONG", c.nodes[1]:cli("PING"))
  end)
end)
