-- Exactly-once effects under faults: the shipped ledger (handlers/before-8.4:
-- post_new_payment.lua and recover_payment.lua, which post each payment with
-- ctx:write and reply with ls.reply) on three hosts and a redis-server with
-- AOF and `appendfsync always`. While payments are published and handled, the
-- spec SIGKILLs and restarts hosts, SIGSTOPs a host until the entries Redis
-- handed it were taken over and finished by the others, then SIGCONTs it (its
-- late outcomes must be skipped), and SIGKILLs and restarts Redis. At the end
-- every account's balance is the exact sum of its published amounts, every
-- account's history lists each of its payments once, every payment has one
-- reply on payments.posted, and nothing is pending.
--
-- Size: LUASTREAM_FAULT_PAYMENTS payments (default 2000, what `./dev test`
-- runs); the long run is
--   LUASTREAM_FAULT_PAYMENTS=20000 ./dev integration tests/integration/exactly_once_spec.lua
local cjson = require "cjson"
local helper = require "tests.integration.helper"

local PAYMENTS = tonumber(os.getenv("LUASTREAM_FAULT_PAYMENTS") or "2000")
local ACCOUNTS = 50
local MIN_IDLE_MS = 1000
local BATCH = 20 -- entries published to a stopped host at once
local READY = 'msg="host ready"'
local SKIPPED = "effects skipped"
local SHIPPED = helper.repo_root .. "/handlers/before-8.4/"
-- Faults, one per chunk of payments, in turn.
local FAULTS = { "kill_host", "stop_host", "kill_redis" }

-- Payment i: round robin over the accounts; every tenth a refund.
local function xadd(i) return helper.payment_xadd(i, ACCOUNTS) end

-- Starts `redis-cli --pipe` publishing payments first..last to srv, in the background.
local function publish_async(srv, first, last)
  local cmds = {}
  for i = first, last do cmds[#cmds + 1] = xadd(i) end
  return srv:pipe_async(cmds)
end

-- The payment ids among the last `n` entries of the stream.
local function recent_payment_ids(srv, n)
  local seen = {}
  for _, e in ipairs(assert(srv:call("XREVRANGE", "payments", "+", "-", "COUNT", n))) do
    for k = 1, #e[2], 2 do
      if e[2][k] == "data" then seen[cjson.decode(e[2][k + 1]).id] = true end
    end
  end
  return seen
end

local function pending_for(srv, consumer)
  local ids = {}
  for _, p in ipairs(assert(srv:call("XPENDING", "payments", "ledger", "-", "+", "100000", consumer))) do
    ids[#ids + 1] = p[1]
  end
  return ids
end

-- Up to `max` items of a list, then how many more.
local function some(list, max)
  max = max or 20
  local out = {}
  for i = 1, math.min(#list, max) do out[i] = tostring(list[i]) end
  local s = table.concat(out, ", ")
  if #list > max then s = s .. string.format(" ... (%d in all)", #list) end
  return s
end

describe("exactly-once effects under faults", function()
  after_each(helper.cleanup)

  it(string.format("posts %d payments over %d accounts once each while hosts and Redis are killed and a host stalls #slow",
    PAYMENTS, ACCOUNTS), function()
    local srv = helper.redis_start({ appendonly = true, args = { "--appendfsync", "always" } })
    local recover, n = helper.read_file(SHIPPED .. "recover_payment.lua")
      :gsub("(local MIN_IDLE%s*=%s*)[^\n%-]+", "%1" .. MIN_IDLE_MS .. " ")
    assert.equal(1, n, "no `local MIN_IDLE = ...` line in recover_payment.lua")
    local dir = helper.handlers_dir({
      ["post_new_payment.lua"] = helper.read_file(SHIPPED .. "post_new_payment.lua"),
      ["recover_payment.lua"] = recover,
    })

    -- Three hosts; a restart keeps the consumer name (the lease of a killed
    -- process is taken over at once, and the new process reads its own
    -- pending entries first).
    local names = { "host-a", "host-b", "host-c" }
    local hosts, every_host = {}, {}
    local function start(k)
      local h = helper.host_start({ "--consumer", names[k] }, { server = srv, dir = dir })
      hosts[k] = h
      every_host[#every_host + 1] = h
      return h
    end
    for k = 1, 3 do start(k) end
    for k = 1, 3 do hosts[k]:wait_log(READY, 30, { plain = true }) end

    local stopped -- a host under SIGSTOP, resumed even when the spec fails
    finally(function() if stopped and stopped:alive() then stopped:signal("CONT") end end)

    local chunks = math.max(9, math.ceil(PAYMENTS / 500))
    local size = math.ceil(PAYMENTS / chunks)
    local done = { kill_host = 0, stop_host = 0, kill_redis = 0, stalls_taken_over = 0 }
    local published = 0

    for c = 1, chunks do
      local first, last = published + 1, math.min(PAYMENTS, published + size)
      if first > last then break end
      local fault = FAULTS[(c - 1) % #FAULTS + 1]
      local k = (c - 1) % 3 + 1
      local xlen_before = srv:xlen("payments")

      if fault == "stop_host" then
        -- A host stopped while Redis has it blocked in XREADGROUP: Redis still
        -- hands it new entries (they turn pending under its name) that it
        -- cannot handle until it is resumed. Entries go out in small
        -- MULTI/EXEC batches: Redis serves blocked readers after each EXEC,
        -- oldest block first, and the first takes the whole batch (as much as
        -- its COUNT asks), so the stopped host is handed entries within three
        -- batches. Its block may end meanwhile (BLOCK 4 s, or it had just
        -- been served): then it is resumed and stopped again, and the next
        -- batches try.
        local h = hosts[k]
        local mark = h:mark()
        local held, i = {}, first
        while #held == 0 do
          assert(i <= last, names[k] .. " was handed none of the chunk's entries while stopped")
          helper.wait_until(function()
            local b = srv:blocked_clients("xreadgroup")
            return b >= 3, b .. " blocked"
          end, 60, "the three hosts idle in XREADGROUP")
          h:signal("STOP")
          stopped = h
          helper.wait_until(function() return helper.proc_state(h.pid) == "T", helper.proc_state(h.pid) end, 10,
            names[k] .. " stopped")
          for _ = 1, 5 do
            if i > last then break end
            local batch = { { "MULTI" } }
            for j = i, math.min(last, i + BATCH - 1) do batch[#batch + 1] = xadd(j) end
            batch[#batch + 1] = { "EXEC" }
            srv:pipe(batch)
            i = i + #batch - 2
            held = pending_for(srv, names[k])
            if #held > 0 then break end
          end
          if #held == 0 then
            h:signal("CONT")
            stopped = nil
          end
        end
        if i <= last then assert.equal(0, publish_async(srv, i, last):wait(60), "redis-cli --pipe") end
        held = pending_for(srv, names[k])
        -- Past min_idle the others claim them (recover_payment) and finish
        -- them: their acks remove them from the pending list. However long
        -- that takes: a stopped process is not a stall to the watchdog, and
        -- no other process waits for its consumer name.
        helper.wait_until(function()
          local _, set = srv:pending_ids("payments", "ledger")
          local left = 0
          for _, id in ipairs(held) do if set[id] then left = left + 1 end end
          return left == 0, left .. " of " .. #held .. " still pending"
        end, 60, "the entries handed to the stopped host taken over and acked by the others")
        h:signal("CONT")
        stopped = nil
        -- resumed, it finishes them too, and its acks find them acked
        h:wait_log(SKIPPED, 30, { plain = true, after = mark })
        done.stalls_taken_over = done.stalls_taken_over + 1
      else
        local pub = publish_async(srv, first, last)
        -- the fault lands while payments arrive and are handled
        helper.wait_until(function() return srv:xlen("payments") > xlen_before end, 30, "publishing under way")
        if fault == "kill_host" then
          hosts[k]:signal("KILL")
          assert.equal(128 + 9, hosts[k]:wait_exit(10))
          assert.equal(0, pub:wait(60), "redis-cli --pipe")
          start(k):wait_log(READY, 30, { plain = true })
        else -- kill_redis
          srv:kill()
          if not pub:wait(60) then pub:kill("KILL") pub:wait(5) end -- it fails with the server gone
          srv:restart()
          -- publish what did not make it before the crash (with `appendfsync
          -- always` what Redis answered is on disk)
          local seen = recent_payment_ids(srv, last - first + 1)
          local missing = {}
          for i = first, last do
            if not seen[i] then missing[#missing + 1] = xadd(i) end
          end
          if #missing > 0 then srv:pipe(missing) end
        end
      end
      done[fault] = done[fault] + 1
      published = last
    end

    -- Wait until the group has read the whole stream, nothing is pending and
    -- every payment has a reply; on a timeout, the report below says what differs.
    local last_id = assert(srv:call("XREVRANGE", "payments", "+", "-", "COUNT", "1"))[1][1]
    local settled, why = pcall(helper.wait_until, function()
      local g = srv:group("payments", "ledger")
      local replies = srv:xlen("payments.posted")
      return g and g["last-delivered-id"] == last_id and g.pending == 0 and replies >= PAYMENTS,
        string.format("last delivered %s of %s, %s pending, %d replies",
          g and g["last-delivered-id"], last_id, g and g.pending, replies)
    end, 60 + PAYMENTS / 100, "every payment posted")
    for k = 1, 3 do assert.equal(0, hosts[k]:stop(30), names[k] .. " exit status") end

    local problems = {}
    local function problem(fmt, ...) problems[#problems + 1] = string.format(fmt, ...) end
    if not settled then problem("%s", why) end

    -- What was published: each payment once on the stream, its entry id kept.
    local entry_of, expected, times_on_stream = {}, {}, {}
    for _, e in ipairs(srv:xrange("payments")) do
      local p = cjson.decode(e.fields.data)
      times_on_stream[p.id] = (times_on_stream[p.id] or 0) + 1
      entry_of[p.id] = e.id
      expected[p.account] = (expected[p.account] or 0) + p.amount_cents
    end
    local not_once = {}
    for i = 1, PAYMENTS do
      if times_on_stream[i] ~= 1 then not_once[#not_once + 1] = i .. " x" .. (times_on_stream[i] or 0) end
    end
    if #not_once > 0 then problem("payments not on the stream exactly once: %s", some(not_once)) end

    -- Balances: the exact sum of each account's published amounts.
    local got = {}
    local flat = assert(srv:call("HGETALL", "ledger:balances"))
    if #flat == 0 and next(flat) then -- RESP3 map
      for account, v in pairs(flat) do got[account] = tonumber(v) end
    else
      for i = 1, #flat, 2 do got[flat[i]] = tonumber(flat[i + 1]) end
    end
    local wrong = {}
    for a = 1, ACCOUNTS do
      local account = helper.account_of(a, ACCOUNTS)
      if got[account] ~= (expected[account] or 0) then
        wrong[#wrong + 1] = string.format("%s expected %s got %s (off by %s)", account, expected[account] or 0,
          tostring(got[account]), tostring((got[account] or 0) - (expected[account] or 0)))
      end
    end
    if #wrong > 0 then problem("%d balances wrong: %s", #wrong, some(wrong)) end

    -- Histories: each of an account's payments once.
    local history_wrong = {}
    for a = 1, ACCOUNTS do
      local account = helper.account_of(a, ACCOUNTS)
      local times = {}
      for _, id in ipairs(assert(srv:call("LRANGE", "ledger:history:" .. account, "0", "-1"))) do
        times[tonumber(id)] = (times[tonumber(id)] or 0) + 1
      end
      for i = a, PAYMENTS, ACCOUNTS do
        if times[i] ~= 1 then history_wrong[#history_wrong + 1] = account .. ":" .. i .. " x" .. (times[i] or 0) end
        times[i] = nil
      end
      for i, t in pairs(times) do history_wrong[#history_wrong + 1] = account .. ":" .. i .. " x" .. t .. " (not its payment)" end
    end
    if #history_wrong > 0 then problem("history entries not exactly once: %s", some(history_wrong)) end

    -- Replies: one per payment, answering its entry.
    local replies, bad_reply = {}, {}
    for _, e in ipairs(srv:xrange("payments.posted")) do
      local body = cjson.decode(e.fields.data)
      local id = body.payment_id
      replies[id] = (replies[id] or 0) + 1
      if e.fields["original-id"] ~= entry_of[id] then
        bad_reply[#bad_reply + 1] = string.format("%s answers %s, payment %s is %s", e.id,
          tostring(e.fields["original-id"]), tostring(id), tostring(entry_of[id]))
      end
    end
    local missing, duplicated = {}, {}
    for i = 1, PAYMENTS do
      if not replies[i] then missing[#missing + 1] = i
      elseif replies[i] > 1 then duplicated[#duplicated + 1] = i .. " x" .. replies[i] end
    end
    if #missing > 0 then problem("payments without a reply: %s", some(missing)) end
    if #duplicated > 0 then problem("payments with more than one reply: %s", some(duplicated)) end
    if #bad_reply > 0 then problem("replies naming the wrong entry: %s", some(bad_reply)) end

    -- Nothing pending.
    local pending = srv:pending_ids("payments", "ledger")
    if #pending > 0 then problem("%d entries still pending in group ledger: %s", #pending, some(pending)) end

    local skipped = 0
    for _, h in ipairs(every_host) do skipped = skipped + #h:lines(SKIPPED, true) end
    io.stderr:write(string.format(
      "exactly_once: %d payments, %d hosts killed, %d stalls (%d taken over), %d Redis crashes, %d late outcomes skipped\n",
      PAYMENTS, done.kill_host, done.stop_host, done.stalls_taken_over, done.kill_redis, skipped))

    assert(#problems == 0, "exactly-once broken:\n  " .. table.concat(problems, "\n  "))
  end)
end)
