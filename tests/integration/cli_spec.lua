-- The command line: --help and --version everywhere, publish, REDIS_URL,
-- and passwords that never show (consumer names: consumers_spec.lua).
local helper = require "tests.integration.helper"
local cjson = require "cjson"

local READY = 'msg="host ready"'

local POST = [[
local ls = require "luastream"

return {
  stream = "payments", group = "ledger", start = "beginning",
  handle = function(payment, ctx)
    ls.log.info("payment posted", { payment_id = payment.id })
  end,
}
]]

describe("luastream CLI", function()
  after_each(helper.cleanup)

  local OPTIONS = {
    run = { "--redis", "--instance", "--consumer", "--log-level" },
    check = {},
    publish = { "--redis", "--key", "--header", "--wait" },
  }
  for _, command in ipairs { "run", "check", "publish" } do
    it(command .. " --help and --version", function()
      local code, stdout, stderr = helper.luastream(command, "--help")
      assert.equal(0, code, stderr)
      assert.matches("usage", stdout:lower(), 1, true)
      assert.matches(command, stdout, 1, true)
      for _, option in ipairs(OPTIONS[command]) do
        assert.matches(option, stdout, 1, true)
      end
      code, stdout, stderr = helper.luastream(command, "--version")
      assert.equal(0, code, stderr)
      assert.matches("%d+%.%d+%.%d+", stdout)
    end)
  end

  it("--help and --version without a command", function()
    local code, stdout = helper.luastream("--help")
    assert.equal(0, code)
    for _, command in ipairs { "run", "check", "publish" } do
      assert.matches(command, stdout, 1, true)
    end
    code, stdout = helper.luastream("--version")
    assert.equal(0, code)
    assert.matches("%d+%.%d+%.%d+", stdout)
  end)

  it("help COMMAND prints that command's --help", function()
    for _, args in ipairs { { "run" }, { "check" }, { "publish" }, { "dead-letters" },
                            { "dead-letters", "list" }, { "dead-letters", "replay" },
                            { "dead-letters", "delete" } } do
      local with_flag = { unpack(args) }
      with_flag[#with_flag + 1] = "--help"
      local code, want, stderr = helper.luastream(unpack(with_flag))
      assert.equal(0, code, stderr)
      local got
      code, got, stderr = helper.luastream("help", unpack(args))
      assert.equal(0, code, stderr)
      assert.equal(want, got)
    end
    local code, stdout = helper.luastream("--help")
    assert.equal(0, code)
    assert.matches("--version", stdout, 1, true)
    local bad, _, stderr = helper.luastream("help", "bogus")
    assert.equal(2, bad)
    assert.matches('unknown command "bogus"', stderr, 1, true)
  end)

  it("dead-letters --help shows the synopses of list --help, replay --help and delete --help", function()
    local _, usage = helper.luastream("dead-letters", "--help")
    for _, sub in ipairs { "list", "replay", "delete" } do
      local code, stdout = helper.luastream("dead-letters", sub, "--help")
      assert.equal(0, code)
      local synopsis = stdout:match("^usage: (.-)\n\n"):gsub("%s+", " ")
      assert.matches(synopsis, usage:gsub("%s+", " "), 1, true)
    end
  end)

  it("publish prints the new id; the entry holds data, partition-key and headers", function()
    local srv = helper.redis_start()
    local body = helper.payment(1, "acme", 500)
    local code, stdout, stderr = helper.luastream("publish", "--redis", srv.url, "payments", body,
      "--key", "acme", "--header", "source=cli-test", "--header", "trace-id=abc-123")
    assert.equal(0, code, stderr)
    local id = helper.trim(stdout)
    assert.matches("^%d+%-%d+$", id)
    local entries = srv:xrange("payments", id, id)
    assert.equal(1, #entries)
    local fields = entries[1].fields
    assert.same(cjson.decode(body), cjson.decode(fields.data))
    fields.data = nil
    assert.same({ ["partition-key"] = "acme", source = "cli-test", ["trace-id"] = "abc-123" }, fields)
  end)

  it("publish --maxlen keeps the stream's newest N entries, and refuses 0", function()
    local srv = helper.redis_start()
    local ids = {}
    for i = 1, 5 do
      local code, stdout, stderr = helper.luastream("publish", "--redis", srv.url, "--maxlen", "3",
        "payments", string.format('{"id":%d}', i))
      assert.equal(0, code, stderr)
      ids[i] = helper.trim(stdout)
    end
    local kept = {}
    for _, e in ipairs(srv:xrange("payments")) do kept[#kept + 1] = e.id end
    assert.same({ ids[3], ids[4], ids[5] }, kept)
    local code, _, stderr = helper.luastream("publish", "--redis", srv.url, "--maxlen", "0", "payments", "{}")
    assert.equal(2, code)
    assert.matches("--maxlen needs a number from 1", stderr, 1, true)
    assert.equal(3, srv:xlen("payments"))
  end)

  it("publish --wait N[,TIMEOUT] waits for N replicas and says how many acknowledged; fewer exits 3", function()
    local master = helper.redis_start()
    local replica = helper.redis_start({ args = { "--replicaof", "127.0.0.1", tostring(master.port) } })
    helper.wait_until(function()
      local info = replica:cli("INFO", "replication")
      return info:find("master_link_status:up", 1, true) ~= nil, info
    end, 30, "the replica in sync with the master")
    local function publish(body, wait)
      local code, out, err = helper.luastream("publish", "--redis", master.url, "payments", body, "--wait", wait)
      return code, helper.trim(out), err
    end
    -- one replica asked for, and it has the entry
    local code, id, err = publish('{"id":1}', "1")
    assert.equal(0, code, id .. err)
    assert.matches("^%d+%-%d+$", id)
    assert.matches("1 of 1 replica acknowledged entry " .. id, err, 1, true)
    assert.equal(1, #replica:xrange("payments", id, id), "the replica has the entry")
    -- two asked for, one there: the id printed (the entry was added), exit 3
    code, id, err = publish('{"id":2}', "2,300ms")
    assert.equal(3, code, id .. err)
    assert.matches("^%d+%-%d+$", id)
    assert.matches("1 of 2 replicas acknowledged entry " .. id .. " within 300ms: it is on the master", err, 1, true)
    assert.equal(1, #master:xrange("payments", id, id))
    -- the replica stopped: connected, but acknowledging nothing
    replica.proc:kill("STOP")
    code, id, err = publish('{"id":3}', "1,200ms")
    replica.proc:kill("CONT")
    assert.equal(3, code, id .. err)
    assert.matches("0 of 1 replica acknowledged entry " .. id .. " within 200ms", err, 1, true)
    assert.equal(1, #master:xrange("payments", id, id))
    -- usage errors add nothing
    for _, bad in ipairs { "0", "x", "1,5", "1,6s", "1,", "-1" } do
      code, id, err = publish('{"id":4}', bad)
      assert.equal(2, code, bad .. ": " .. id .. err)
      assert.matches("--wait", err, 1, true)
    end
    assert.equal(3, master:xlen("payments"))
  end)

  it("publish reads REDIS_URL when --redis is not given", function()
    local srv = helper.redis_start()
    local code, stdout, stderr = helper.luastream("publish", "payments", '{"id":2}', { env = { REDIS_URL = srv.url } })
    assert.equal(0, code, stderr)
    assert.equal(helper.trim(stdout), srv:xrange("payments")[1].id)
  end)

  it("publish refuses a body that is not JSON and writes nothing", function()
    local srv = helper.redis_start()
    local code, stdout, stderr = helper.luastream("publish", "--redis", srv.url, "payments", "{not json")
    assert.is_not.equal(0, code)
    assert.equal("", helper.trim(stdout))
    assert.is_true(#stderr > 0)
    assert.equal(0, srv:call("EXISTS", "payments"))
  end)

  describe("with a password in the URL", function()
    local SECRET, WRONG = "s3cret-Pw-4711", "wr0ng-Pw-0815"

    it("publishes and runs without ever printing the password", function()
      local srv = helper.redis_start({ requirepass = SECRET })
      local code, stdout, stderr = helper.luastream("publish", "--redis", srv.url, "payments",
        helper.payment(1, "acme", 500), "--key", "acme")
      assert.equal(0, code, stderr)
      helper.assert_no_secret(SECRET, stdout, stderr)

      local host = helper.host_start({}, {
        server = srv, log_level = "debug", dir = helper.handlers_dir({ ["post.lua"] = POST }),
      })
      local ready = host:wait_log(READY, 20, { plain = true })
      assert.matches("***", ready, 1, true)
      host:wait_records({ msg = "payment posted" }, 1, 20, "the payment posted")
      assert.equal(0, host:stop())
      helper.assert_no_secret(SECRET, host:log())
    end)

    it("fails on a wrong password without printing it, naming the server", function()
      local srv = helper.redis_start({ requirepass = SECRET })
      local url = "redis://:" .. WRONG .. "@127.0.0.1:" .. srv.port
      local code, stdout, stderr = helper.luastream("publish", "--redis", url, "payments", '{"id":1}')
      assert.is_not.equal(0, code)
      helper.assert_no_secret(WRONG, stdout, stderr)
      assert.matches("127.0.0.1:" .. srv.port, stderr, 1, true)
      assert.equal(0, srv:call("EXISTS", "payments"))

      local host = helper.host_start({}, {
        url = url, log_level = "debug", dir = helper.handlers_dir({ ["post.lua"] = POST }),
      })
      host:wait_records(function(r)
        return r.level == "error" and r._line:find("127.0.0.1:" .. srv.port, 1, true) ~= nil
      end, 1, 20, "an error naming the server")
      host:stop()
      helper.assert_no_secret(WRONG, host:log())
      assert.equal(0, host:count({ msg = "host ready" }))
    end)
  end)
end)
