-- Consumer names: <hostname>-<handler>[-<instance>] by default, whatever the
-- other files of the directory; one live process per name and group (the
-- lease); handler files that would split a group's traffic are refused.
local helper = require "tests.integration.helper"

local READY = 'msg="host ready"'

local function hostname()
  local p = assert(io.popen("hostname"))
  local name = helper.trim(p:read("*a"))
  p:close()
  return name
end

-- Logs which consumer handled the entry; payments with id <= hold wait for
-- the file `gate` before they finish.
local function named(group, opts)
  opts = opts or {}
  return string.format([[
local ls = require "luastream"

return {
  stream = "payments", group = %q, start = "beginning",%s
  handle = function(payment, ctx)
    ls.log.info("handled", { payment_id = payment.id, consumer = ctx.consumer, group = ctx.group })
    if payment.id <= %d then
      while not io.open(%q) do ls.sleep(20) end
    end
    ls.log.info("finished", { payment_id = payment.id, consumer = ctx.consumer, group = ctx.group })
  end,
}
]], group, opts.extra or "", opts.hold or 0, opts.gate or "/nonexistent")
end

local function handled_by(host, group)
  local recs = host:records({ msg = "handled", group = group })
  return recs[1] and recs[1].consumer
end

describe("consumer names", function()
  after_each(helper.cleanup)

  it("are <hostname>-<handler>, with -N for --instance N or LUASTREAM_INSTANCE; a file's own name wins", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({
      ["a_first.lua"] = named("g-first"),
      ["b_second.lua"] = named("g-second"),
      ["c_custom.lua"] = named("g-custom", { extra = '\n  consumer = "custom-name",' }),
    })
    local me = hostname()
    local runs = {
      { args = {}, env = {}, suffix = "" },
      { args = { "--instance", "3" }, env = {}, suffix = "-3" },
      { args = {}, env = { LUASTREAM_INSTANCE = "7" }, suffix = "-7" },
    }
    for i, run in ipairs(runs) do
      local host = helper.host_start(run.args, { server = srv, dir = dir, env = run.env })
      host:wait_log(READY, 20, { plain = true })
      srv:cli("XADD", "payments", "*", "data", helper.payment(100 + i, "acme", 1))
      host:wait_records({ msg = "finished" }, 3, 20, "the payment handled by all three groups")
      local expected = {
        ["g-first"] = me .. "-a_first" .. run.suffix,
        ["g-second"] = me .. "-b_second" .. run.suffix,
        ["g-custom"] = "custom-name",
      }
      for group, consumer in pairs(expected) do
        assert.equal(consumer, handled_by(host, group))
        assert.is_not_nil(srv:consumers("payments", group)[consumer], consumer .. " in XINFO CONSUMERS of " .. group)
      end
      assert.equal(0, host:stop())
    end
  end)

  it("--consumer NAME names every file without its own name; --consumer \"\" and a bad --instance are errors", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["a_first.lua"] = named("g-first"), ["b_second.lua"] = named("g-second") })
    local host = helper.host_start({ "--consumer", "worker-a" }, { server = srv, dir = dir })
    host:wait_log(READY, 20, { plain = true })
    srv:cli("XADD", "payments", "*", "data", helper.payment(1, "acme", 1))
    host:wait_records({ msg = "finished" }, 2, 20, "both groups")
    assert.equal("worker-a", handled_by(host, "g-first"))
    assert.equal("worker-a", handled_by(host, "g-second"))
    assert.equal(0, host:stop())

    for _, bad in ipairs {
      { { "--consumer", "" }, "--consumer" },
      { { "--instance", "x" }, "--instance" },
      { { "--instance", "-1" }, "--instance" },
      { { "--consumer", "a", "--instance", "1" }, "--instance" },
    } do
      local argv = { helper.bin(), "run", "--redis", srv.url }
      for _, a in ipairs(bad[1]) do argv[#argv + 1] = a end
      argv[#argv + 1] = dir
      local code, _, stderr = helper.run(argv)
      assert.equal(2, code, stderr)
      assert.matches(bad[2], stderr, 1, true)
    end
    local code, _, stderr = helper.run({ helper.bin(), "run", "--redis", srv.url, dir },
      { env = { LUASTREAM_INSTANCE = "one" } })
    assert.equal(2, code, stderr)
    assert.matches("LUASTREAM_INSTANCE", stderr, 1, true)
  end)

  it("stay the same when an unrelated file is added: pending entries are handled after a restart", function()
    local srv = helper.redis_start()
    local gate = helper.tmpdir("gate") .. "/go"
    local dir = helper.handlers_dir({ ["post.lua"] = named("ledger", { hold = 4, gate = gate }) })
    local a = helper.host_start({}, { server = srv, dir = dir })
    a:wait_log(READY, 20, { plain = true })
    for id = 1, 4 do helper.publish(srv, "payments", helper.payment(id, "acme")) end
    a:wait_records({ msg = "handled" }, 1, 20, "the first payment running")
    local first = handled_by(a, "ledger")
    a:signal("KILL")
    a:wait_exit(10)
    local _, pending = srv:pending_ids("payments", "ledger")
    assert.is_true(next(pending) ~= nil, "entries left pending by the killed host")

    -- an unrelated handler file that sorts first
    helper.write_file(dir .. "/a_audit.lua", named("audit"))
    helper.write_file(gate, "")
    local b = helper.host_start({}, { server = srv, dir = dir })
    b:wait_log(READY, 20, { plain = true })
    helper.wait_until(function()
      local n = srv:group("payments", "ledger").pending
      return n == 0, n .. " pending"
    end, 20, "the killed host's pending entries handled by its successor")
    assert.equal(first, handled_by(b, "ledger"))
    assert.equal(0, b:stop())
  end)
end)

describe("two processes with one consumer name", function()
  after_each(helper.cleanup)

  -- An explicit name held by a live process of this machine: refused at
  -- once, without waiting out the holder's lease.
  it("never run together: the second is refused at once, naming the group, the name, the holder and what to pass", function()
    local srv = helper.redis_start()
    local gate = helper.tmpdir("gate") .. "/go"
    local dir = helper.handlers_dir({ ["post.lua"] = named("ledger", { hold = 4, gate = gate }) })
    local name = "svc"
    local a = helper.host_start({ "--consumer", name }, { server = srv, dir = dir })
    a:wait_log(READY, 20, { plain = true })
    for id = 1, 4 do helper.publish(srv, "payments", helper.payment(id, "acme")) end
    a:wait_records({ msg = "handled" }, 1, 20, "the first payment running")

    local b = helper.host_start({ "--consumer", name }, { server = srv, dir = dir })
    local code = b:wait_exit(10) -- the holder's lease has 20 s to live: no wait for it
    assert.is_not.equal(0, code)
    assert.equal(0, b:count({ msg = "consumer name held by another process: waiting for its lease to expire in case it crashed" }))
    local refused = b:records({ msg = "consumer name in use by a live process" })[1]
    assert.is_not_nil(refused, b:log())
    assert.equal("payments", refused.stream)
    assert.equal("ledger", refused.group)
    assert.equal(name, refused.consumer)
    assert.matches("pid " .. a.pid, refused.holder, 1, true)
    assert.matches("--instance N", refused.hint, 1, true)
    assert.matches("--consumer NAME", refused.hint, 1, true)
    assert.equal(0, b:count({ msg = "handled" }), "the second process ran nothing")
    assert.equal(0, b:count({ msg = "host ready" }))
    assert.is_true(a:alive())

    -- with another name it runs beside the first
    local c = helper.host_start({ "--consumer", name .. "-2" }, { server = srv, dir = dir })
    c:wait_log(READY, 20, { plain = true })
    assert.is_not_nil(srv:consumers("payments", "ledger")[name .. "-2"])
    assert.equal(0, c:count({ msg = "handled" }), "the first one's entries are not run again")
    assert.equal(0, c:stop())

    helper.write_file(gate, "")
    a:wait_records({ msg = "finished" }, 4, 20, "the first process finishing its payments")
    assert.equal(4, a:count({ msg = "handled" }))
    assert.equal(0, a:stop())
    assert.equal(0, srv:call("EXISTS", "luastream:consumer:{payments}:ledger:" .. name), "the lease is given back on a clean stop")
  end)

  it("--instance N held by a live process here is refused at once too", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["post.lua"] = named("ledger") })
    local a = helper.host_start({ "--instance", "4" }, { server = srv, dir = dir })
    a:wait_log(READY, 20, { plain = true })
    local b = helper.host_start({ "--instance", "4" }, { server = srv, dir = dir })
    assert.equal(1, b:wait_exit(10))
    local refused = b:records({ msg = "consumer name in use by a live process" })[1]
    assert.is_not_nil(refused, b:log())
    assert.equal(hostname() .. "-post-4", refused.consumer)
    assert.equal(0, a:stop())
  end)

  it("a killed predecessor on the same machine is taken over at once", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["post.lua"] = named("ledger") })
    local a = helper.host_start({}, { server = srv, dir = dir })
    a:wait_log(READY, 20, { plain = true })
    local key = "luastream:consumer:{payments}:ledger:" .. hostname() .. "-post"
    assert.equal(1, srv:call("EXISTS", key))
    a:signal("KILL")
    a:wait_exit(10)
    local b = helper.host_start({}, { server = srv, dir = dir })
    -- ready within 15 s, under the lease's 20 s time to live, and by the
    -- takeover: no wait for the lease to expire was even started
    b:wait_log(READY, 15, { plain = true })
    assert.equal(1, b:count({ msg = "consumer lease taken over from a process that is gone" }))
    assert.equal(0, b:count({ msg = "consumer name held by another process: waiting for its lease to expire in case it crashed" }))
    assert.equal(0, b:stop())
  end)
end)

describe("processes started beside a live one, with neither --instance nor --consumer", function()
  after_each(helper.cleanup)

  local NUMBERED = "consumer names numbered: a live process on this machine holds the names before"

  it("number their names -1, -2 at once, and a restarted one gets its number back", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["post.lua"] = named("ledger") })
    local me = hostname() .. "-post"
    local a = helper.host_start({}, { server = srv, dir = dir })
    a:wait_log(READY, 20, { plain = true })
    assert.equal(0, a:count({ msg = NUMBERED }), "the first keeps the unnumbered names")
    -- ready well within the first one's 20 s lease: nothing waited out
    local b = helper.host_start({}, { server = srv, dir = dir })
    b:wait_log(READY, 10, { plain = true })
    local c = helper.host_start({}, { server = srv, dir = dir })
    c:wait_log(READY, 10, { plain = true })
    assert.equal("1", b:records({ msg = NUMBERED })[1].instance)
    assert.equal("unnumbered", b:records({ msg = NUMBERED })[1].first)
    assert.equal("2", c:records({ msg = NUMBERED })[1].instance)
    local consumers = srv:consumers("payments", "ledger")
    for _, name in ipairs { me, me .. "-1", me .. "-2" } do
      assert.is_not_nil(consumers[name], name .. " in XINFO CONSUMERS")
    end
    -- each entry once, by whichever consumer Redis gave it to
    for id = 1, 9 do helper.publish(srv, "payments", helper.payment(id, "acme")) end
    helper.wait_until(function()
      return a:count({ msg = "finished" }) + b:count({ msg = "finished" }) + c:count({ msg = "finished" }) == 9
    end, 20, "the nine payments handled")

    -- the second dies and starts again: its number is free again, the others' are not
    b:signal("KILL")
    b:wait_exit(10)
    local b2 = helper.host_start({}, { server = srv, dir = dir })
    b2:wait_log(READY, 10, { plain = true })
    assert.equal("1", b2:records({ msg = NUMBERED })[1].instance)
    -- the first stops cleanly; a process started now takes the unnumbered names again
    assert.equal(0, a:stop())
    local a2 = helper.host_start({}, { server = srv, dir = dir })
    a2:wait_log(READY, 10, { plain = true })
    assert.equal(0, a2:count({ msg = NUMBERED }))
    for _, h in ipairs { a2, b2, c } do assert.equal(0, h:stop()) end
  end)

  it("with --processes N: a second supervisor's workers take I + N, I + 2N, ...", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["post.lua"] = named("ledger") })
    local me = hostname() .. "-post"
    local one = helper.host_start({ "--processes", "2" }, { server = srv, dir = dir })
    one:wait_records({ msg = "host ready" }, 2, 30, "the first supervisor's workers ready")
    local two = helper.host_start({ "--processes", "2" }, { server = srv, dir = dir })
    two:wait_records({ msg = "host ready" }, 2, 10, "the second supervisor's workers ready")
    local numbered = {}
    for _, r in ipairs(two:records({ msg = NUMBERED })) do numbered[#numbered + 1] = r.instance end
    table.sort(numbered)
    assert.same({ "2", "3" }, numbered)
    local consumers = srv:consumers("payments", "ledger")
    for i = 0, 3 do
      assert.is_not_nil(consumers[me .. "-" .. i], me .. "-" .. i .. " in XINFO CONSUMERS")
    end
    assert.equal(0, two:stop())
    assert.equal(0, one:stop())
  end)
end)

describe("two handler files on one stream and group", function()
  after_each(helper.cleanup)

  local function file(read, extra)
    return string.format([[
return {
  stream = "payments", group = "ledger", read = %q,%s
  handle = function() end,
}
]], read, extra or "")
  end

  it("are refused by check and run, naming both files, the stream and the group", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["one.lua"] = file("new"), ["two.lua"] = file("new") })
    for _, argv in ipairs { { "check", dir }, { "run", "--redis", srv.url, dir } } do
      local code, _, stderr = helper.luastream(unpack(argv))
      assert.equal(1, code, stderr)
      assert.matches("one.lua", stderr, 1, true)
      assert.matches("two.lua", stderr, 1, true)
      assert.matches("stream payments", stderr, 1, true)
      assert.matches("group ledger", stderr, 1, true)
    end
    assert.equal(0, srv:call("EXISTS", "payments"), "run joined no group")
  end)

  it("are accepted as the new + reclaim pair", function()
    local dir = helper.handlers_dir({ ["one.lua"] = file("new"),
      ["two.lua"] = file("reclaim", " min_idle = 1000,") })
    local code, _, stderr = helper.luastream("check", dir)
    assert.equal(0, code, stderr)
  end)

  it("added while running: the new file does not start, and the log says why", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["one.lua"] = file("new") })
    local host = helper.host_start({}, { server = srv, dir = dir })
    host:wait_log(READY, 20, { plain = true })
    helper.write_file(dir .. "/two.lua", file("new"))
    local line = host:wait_log("handler reload failed, not started", 20, { plain = true })
    assert.matches("one.lua", line, 1, true)
    assert.matches("group ledger", line, 1, true)
    assert.equal(1, #srv:call("XINFO", "CONSUMERS", "payments", "ledger"))
    assert.equal(0, host:stop())
  end)
end)

describe("consumer leases", function()
  after_each(helper.cleanup)

  -- The keepalive: every lease of a process renewed in one script call per
  -- slot (one on a single server) every 5 s; each consumer still told when
  -- its own lease was taken.
  it("renews every lease of a process in one call every 5 s, and a lost one stops only its consumer", function()
    local srv = helper.redis_start()
    local files, n = {}, 5
    for i = 1, n do
      files[string.format("h%d.lua", i)] = string.format([[
return { stream = "ka-%d", group = "g", handle = function() end }
]], i)
    end
    local host = helper.host_start({}, { server = srv, dir = helper.handlers_dir(files) })
    host:wait_log(READY, 20, { plain = true })
    local monitor = srv:monitor()
    -- the renewals the host sent (not the commands its scripts ran): the
    -- keepalive's calls, whose ARGV starts with the process's identity
    -- ("token pid machine host"), the time to live and the number of leases
    local function renewals()
      local out = {}
      for _, c in ipairs(monitor:commands()) do
        local a = c.args
        if c.client ~= "lua" and (a[1] == "EVALSHA" or a[1] == "EVAL") then
          local nkeys = tonumber(a[3])
          if nkeys and (a[4 + nkeys] or ""):match("^%x+ %d+ ") and a[5 + nkeys] == "20000" then
            out[#out + 1] = tonumber(a[6 + nkeys])
          end
        end
      end
      return out
    end
    helper.wait_until(function() return #renewals() >= 2 end, 15, "two renewals")
    local seen = renewals()
    for i, nkeys in ipairs(seen) do
      assert.equal(n, nkeys, "renewal " .. i .. " renews " .. nkeys .. " of the " .. n .. " leases")
    end
    -- another process takes h3's name: the renewal tells h3's consumer, and
    -- only it (the host then stops, as on any lost name)
    local key = assert(srv:call("KEYS", "luastream:consumer:{ka-3}:*"))[1]
    assert(key, "h3's lease")
    srv:cli("SET", key, "x 1 other/1 elsewhere", "PX", "60000")
    assert.equal(1, host:wait_exit(15))
    local lost = host:records({ msg = "consumer lease lost to another process: stopped reading" })
    assert.equal(1, #lost)
    assert.equal("ka-3", lost[1].stream)
    assert.equal("elsewhere pid 1", lost[1].holder)
    assert.equal("x 1 other/1 elsewhere", srv:cli("GET", key), "not dropped: another process's")
    monitor:stop()
  end)
end)
