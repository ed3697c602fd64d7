-- `luastream status` on a real 3-master Redis Cluster: a partitioned handler
-- (partitions = 8, by_key, reply_to) beside handlers/cluster/post_payment.lua,
-- so that one round of status's commands goes to every master at once and
-- their replies come back in any order. Every count, consumer and dead-letter
-- length status prints, in JSON and in its tables, must be what redis-cli
-- reads from the master of that key, and the same on every run.
local helper = require "tests.integration.helper"
local cluster = require "tests.integration.support.cluster"
local processes = require "tests.integration.support.processes"
local cjson = require "cjson"

local READY = 'msg="host ready"'
local EXAMPLE = helper.repo_root .. "/handlers/cluster/post_payment.lua"
local PARTITIONS = 8

local ORDERS = [[
local ls = require "luastream"
return {
  stream = "orders", group = "count", start = "beginning", partitions = 8, by_key = true,
  reply_to = "orders.done",
  handle = function(order) return ls.reply({ id = order.id }) end,
}
]]

local function account(id) return "acct-" .. (id % 13) end

-- What redis-cli says of stream and group, read on the master of stream:
-- the row status must print (its source and retry keys, its consumers over
-- both, summed as status sums them).
local function expected(c, stream, group, dead_letter)
  local function on(key, ...) return c:master_of(key):call(...) end
  local function key_state(key)
    local st = { exists = false, group_exists = false }
    local len = on(key, "EXISTS", key)
    if len == 0 then return st end
    st.exists = true
    st.length = on(key, "XLEN", key)
    for _, g in ipairs(on(key, "XINFO", "GROUPS", key)) do
      if g.name == group then
        st.group_exists = true
        st.pending = g.pending
        st.lag = g.lag -- nil when Redis cannot tell: status prints null
        st.last_delivered_id = g["last-delivered-id"]
        -- the ages status must show, by hand: the server's time now, the
        -- ms of the entry after the last delivered and of the smallest
        -- pending id (status runs later: its ages are no smaller)
        local t = on(key, "TIME")
        st.time_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        local next = on(key, "XRANGE", key, "(" .. st.last_delivered_id, "+", "COUNT", "1")[1]
        st.next_ms = next and tonumber(next[1]:match("^(%d+)")) or nil
        local summary = on(key, "XPENDING", key, group)
        st.oldest_ms = summary[2] and tonumber(summary[2]:match("^(%d+)")) or nil
      end
    end
    return st
  end
  local retry = stream .. ":retry:" .. group
  local want = { stream = stream, group = group, source = key_state(stream), retry = key_state(retry) }
  local consumers = {}
  for _, key in ipairs { stream, retry } do
    if want[key == stream and "source" or "retry"].group_exists then
      for _, ci in ipairs(on(key, "XINFO", "CONSUMERS", key, group)) do
        consumers[ci.name] = (consumers[ci.name] or 0) + ci.pending
      end
    end
  end
  want.consumers = consumers
  if dead_letter then want.dead_letter = on(dead_letter, "XLEN", dead_letter) end
  return want
end

local function null(v) if v == nil then return cjson.null end return v end

local function check_json(doc, wants)
  assert.equal(#wants, #doc.groups, "one row per stream and group")
  for i, want in ipairs(wants) do
    local g = doc.groups[i]
    local where = want.stream .. " " .. want.group
    assert.equal(want.stream, g.stream, "row " .. i)
    assert.equal(want.group, g.group, where)
    for _, side in ipairs { "source", "retry" } do
      local w, got = want[side], g[side]
      assert.equal(w.exists, got.exists, where .. " " .. side .. ".exists")
      assert.equal(w.group_exists, got.group_exists, where .. " " .. side .. ".group_exists")
      assert.equal(null(w.length), got.length, where .. " " .. side .. ".length")
      assert.equal(null(w.pending), got.pending, where .. " " .. side .. ".pending")
      assert.equal(null(w.lag), got.lag, where .. " " .. side .. ".lag")
      assert.equal(null(w.last_delivered_id), got.last_delivered_id, where .. " " .. side .. ".last_delivered_id")
      assert.equal(cjson.null, got.error, where .. " " .. side .. ".error")
      for field, ms in pairs { lag_age_ms = w.next_ms, oldest_pending_age_ms = w.oldest_ms } do
        if not w.group_exists then
          assert.equal(cjson.null, got[field], where .. " " .. side .. "." .. field)
        elseif ms == nil then
          assert.equal(0, got[field], where .. " " .. side .. "." .. field)
        else
          local least = w.time_ms - ms
          assert(type(got[field]) == "number" and got[field] >= least and got[field] < least + 60000,
            where .. " " .. side .. "." .. field .. " = " .. tostring(got[field]) .. ", by hand at least " .. least)
        end
      end
    end
    local got = {}
    for _, ci in ipairs(g.consumers) do
      assert.is_nil(got[ci.name], where .. ": consumer " .. ci.name .. " listed twice")
      got[ci.name] = ci.pending
    end
    assert.same(want.consumers, got, where .. " consumers")
    if want.dead_letter then assert.equal(want.dead_letter, g.dead_letter.length, where .. " dead letters") end
    for _, a in ipairs(g.attention) do
      assert.is_not.equal("error", a.kind, where .. ": " .. a.message)
      assert.is_nil(a.message:find("does not exist", 1, true), where .. ": " .. a.message)
    end
  end
end

-- The tables: a row per key with its length, lag and pending; a row per consumer.
local function check_table(out, wants)
  local function n(v) return v == nil and "%?" or tostring(v) end
  local nconsumers = 0
  for _, want in ipairs(wants) do
    local function row(key, st)
      local pat = "\n" .. key:gsub("%p", "%%%0") .. "%s+" .. want.group .. "%s+" .. n(st.length)
        .. "%s+" .. n(st.lag) .. "%s+" .. n(st.pending) .. "%s"
      assert.is_truthy(out:find(pat), "no row `" .. key .. " " .. want.group .. " " .. n(st.length)
        .. " " .. n(st.lag) .. " " .. n(st.pending) .. "` in:\n" .. out)
    end
    row(want.stream, want.source)
    if want.retry.group_exists then row(want.stream .. ":retry:" .. want.group, want.retry) end
    for name, pending in pairs(want.consumers) do
      nconsumers = nconsumers + 1
      local pat = "\n" .. want.stream:gsub("%p", "%%%0") .. "%s+" .. want.group .. "%s+"
        .. name:gsub("%p", "%%%0") .. "%s+" .. pending .. "%s"
      assert.is_truthy(out:find(pat), "no consumer row `" .. want.stream .. " " .. name .. " "
        .. pending .. "` in:\n" .. out)
    end
  end
  local _, lease_header = out:find("LEASE RENEWED\n", 1, true)
  assert.is_truthy(lease_header, out)
  local rows = out:sub(lease_header + 1):match("^(.-)\n\n") or ""
  local count = 0
  for _ in rows:gmatch("[^\n]+") do count = count + 1 end
  assert.equal(nconsumers, count, "consumer rows in:\n" .. out)
  assert.is_nil(out:find("does not exist", 1, true), out)
  assert.is_nil(out:find("unexpected reply", 1, true), out)
end

describe("luastream status on a Redis Cluster", function()
  after_each(helper.cleanup)

  it("reports every partition's counts and consumers as the masters hold them, the same on every run", function()
    local c = cluster.start { masters = 3 }
    local dir = helper.handlers_dir({
      ["orders.lua"] = ORDERS,
      ["post_payment.lua"] = helper.read_file(EXAMPLE),
    })
    local host = helper.host_start({ "--redis", c.url }, { dir = dir })
    host:wait_log(READY, 30, { plain = true })

    -- 39 orders over the partitions, unevenly (13 accounts), and 6 payments
    local N = 39
    for id = 1, N do
      local code, out, err = helper.luastream("publish", "--redis", c.url, "orders",
        string.format('{"id":%d}', id), "--key", account(id), "--partitions", tostring(PARTITIONS))
      assert.equal(0, code, out .. err)
    end
    local cmds = {}
    for id = 1, 6 do
      cmds[#cmds + 1] = { "XADD", "{payments}", "*", "data",
        string.format('{"id":%d,"account":"acct-%d","amount_cents":%d}', id, id % 3, 100 + id) }
    end
    c:run(cmds)
    processes.wait_until(function()
      local n = 0
      for p = 0, PARTITIONS - 1 do n = n + (c:call("XLEN", "orders.done:{" .. p .. "}") or 0) end
      local posted = c:call("XLEN", "{payments}.posted") or 0
      return n == N and posted == 6, n .. " orders, " .. posted .. " payments answered"
    end, 30, "every order and payment handled")
    assert.equal(0, host:stop())

    -- Something different on every row: more entries nobody has read yet
    -- (a lag), some of them read by a consumer of our own (pending), dead letters.
    for id = N + 1, N + 20 do
      local code, out, err = helper.luastream("publish", "--redis", c.url, "orders",
        string.format('{"id":%d}', id), "--key", account(id), "--partitions", tostring(PARTITIONS))
      assert.equal(0, code, out .. err)
    end
    for p = 0, PARTITIONS - 1, 2 do
      local stream = "orders:{" .. p .. "}"
      c:master_of(stream):call("XREADGROUP", "GROUP", "count", "by-hand", "COUNT", tostring(p / 2 + 1),
        "STREAMS", stream, ">")
    end
    c:run { { "XADD", "{payments}.dead", "*", "data", "{}" }, { "XADD", "{payments}.dead", "*", "data", "{}" },
            { "XADD", "{payments}", "*", "data", '{"id":7,"account":"acct-1","amount_cents":1}' } }

    -- status's rows: the handlers' files in name order, orders' partitions in order
    local wants = {}
    for p = 0, PARTITIONS - 1 do wants[#wants + 1] = expected(c, "orders:{" .. p .. "}", "count") end
    wants[#wants + 1] = expected(c, "{payments}", "ledger", "{payments}.dead")
    local lengths = {}
    for _, w in ipairs(wants) do lengths[w.source.length] = true end
    local distinct = 0
    for _ in pairs(lengths) do distinct = distinct + 1 end
    assert.is_true(distinct >= 3, "rows of different lengths, so that a mixed-up reply shows")

    -- each group paused: its pause key in its stream's slot, the
    -- partitions' in the base stream's
    for _, sg in ipairs { { "orders", "count" }, { "{payments}", "ledger" } } do
      local code, out, err = helper.luastream("pause", "--redis", c.url, sg[1], sg[2], "--reason", "cluster")
      assert.equal(0, code, out .. err)
    end
    for run = 1, 5 do
      local code, out, err = helper.luastream("status", "--redis", c.url, "--json", dir)
      assert.equal(1, code, "run " .. run .. ": the by-hand consumer and the lag need attention\n" .. out .. err)
      local ok, doc = pcall(cjson.decode, out)
      assert(ok, "not JSON: " .. out .. err)
      check_json(doc, wants)
      for _, g in ipairs(doc.groups) do
        assert.equal("cluster", type(g.pause) == "table" and g.pause.reason, g.stream .. " " .. g.group)
      end
    end
    for _ = 1, 3 do
      local code, out, err = helper.luastream("status", "--redis", c.url, dir)
      assert.equal(1, code, out .. err)
      check_table(out, wants)
    end

    -- the streams named instead of DIR: their rows in the order named,
    -- whichever master answered first
    local args, named = { "status", "--redis", c.url, "--json" }, {}
    for p = PARTITIONS - 1, 0, -1 do
      args[#args + 1] = "orders:{" .. p .. "}"
      named[#named + 1] = wants[p + 1]
    end
    for _ = 1, 3 do
      local code, out, err = helper.luastream(unpack(args))
      assert.equal(1, code, out .. err)
      local ok, doc = pcall(cjson.decode, out)
      assert(ok, "not JSON: " .. out .. err)
      check_json(doc, named)
    end
  end)
end)
