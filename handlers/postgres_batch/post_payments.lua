-- The ledger of handlers/postgres/post_payment.lua, a call of up to 100
-- payments at a time: each call's payments go into `ledger` with one
-- multi-row INSERT and move their accounts' balances with one more, in one
-- transaction with the record of every entry (ctx:pg_once_batch), so
-- exactly once: a call delivered again (its worker crashed after the commit,
-- before the acks) finds its entries recorded and only acks them.
--
-- The tables are handlers/postgres/schema.sql's. Run this folder or
-- handlers/postgres, not both: each posts every payment of the stream.
--   psql -f handlers/postgres/schema.sql
--   luastream run --postgres URL handlers/postgres_batch
local ls = require "luastream"

local MIN_IDLE = 30000 -- ms
local backoff = ls.backoff { base = "1s", max = "1m", jitter = 0.2 }

-- What PostgreSQL takes: whole numbers a bigint holds exactly, an account
-- text can hold (no NUL). A payment it would refuse fails its whole call's
-- transaction, and with it every other payment of the call: it is
-- rejected here, alone.
local function valid(p)
  return type(p.id) == "number" and p.id % 1 == 0 and math.abs(p.id) <= 2^53 and type(p.account) == "string"
    and not p.account:find("\0", 1, true) and type(p.amount_cents) == "number"
    and p.amount_cents % 1 == 0 and math.abs(p.amount_cents) <= 2^53
end

-- "($1, $2, $3), ($4, $5, $6), ..." for n rows of width columns.
local function rows_sql(n, width)
  local rows, at = {}, 0
  for r = 1, n do
    local cols = {}
    for c = 1, width do
      at = at + 1
      cols[c] = "$" .. at
    end
    rows[r] = "(" .. table.concat(cols, ", ") .. ")"
  end
  return table.concat(rows, ", ")
end

-- Posts fresh (the entries not recorded before): their rows in one INSERT,
-- which returns the payment ids it added (an id already there, from another
-- entry, adds nothing), then each account's sum of those in one more, sent
-- with the COMMIT. Returns {fresh = {[entry] = true}, posted = {[payment id]
-- = the entry that posted it}}.
local function post(tx, fresh)
  local args = {}
  for _, e in ipairs(fresh) do
    local p = e.msg
    args[#args + 1], args[#args + 2], args[#args + 3] = p.id, p.account, p.amount_cents
  end
  local added, err, sqlstate = tx:query("INSERT INTO ledger (payment_id, account, amount_cents) VALUES "
    .. rows_sql(#fresh, 3) .. " ON CONFLICT (payment_id) DO NOTHING RETURNING payment_id", unpack(args))
  if not added then return nil, err, sqlstate end
  local posted, sums, accounts = {}, {}, {}
  for _, row in ipairs(added) do posted[tonumber(row.payment_id)] = true end
  local claimed, new = {}, {}
  for _, e in ipairs(fresh) do
    local p = e.msg
    new[e] = true
    if posted[p.id] and not claimed[p.id] then -- the first entry of an id posts it
      claimed[p.id] = e
      if not sums[p.account] then accounts[#accounts + 1] = p.account end
      sums[p.account] = (sums[p.account] or 0) + p.amount_cents
    end
  end
  if #accounts > 0 then
    args = {}
    for _, a in ipairs(accounts) do args[#args + 1], args[#args + 2] = a, sums[a] end
    local ok, why, state = tx:exec("INSERT INTO balances (account, cents) VALUES " .. rows_sql(#accounts, 2)
      .. " ON CONFLICT (account) DO UPDATE SET cents = balances.cents + EXCLUDED.cents", unpack(args))
    if not ok then return nil, why, state end
  end
  return { fresh = new, posted = claimed }
end

return {
  stream = "payments",
  group = "ledger-pg-batch",
  read = "claiming",
  claim_fallback = true,
  min_idle = MIN_IDLE,
  workers = 4,
  by_key = true,
  batch = 200,
  batch_max = 100,
  max_deliveries = 10,
  dead_letter = "payments.dead",

  handle_batch = function(entries, ctx)
    local outcomes, good = {}, {}
    for i, e in ipairs(entries) do
      if valid(e.msg) then
        good[#good + 1] = e
      else
        outcomes[i] = ls.reject("a payment needs a whole id, an account (text) and a whole amount_cents")
      end
    end
    local ran, claimed, sqlstate = ctx:pg_once_batch(good, post)
    if ran == nil then
      -- no database, a timeout, a serialisation failure: nothing was
      -- written; the whole call tries again later
      ls.log.warn("ledger write failed, retrying", { entries = #good, error = claimed, sqlstate = sqlstate })
      local later = ls.retry_after(backoff(entries[1].ctx))
      for i = 1, #entries do outcomes[i] = outcomes[i] or later end
      return outcomes
    end
    -- ran false: every entry was recorded before (posted, or rejected, by an
    -- earlier delivery of its call): acked
    local done = ran and claimed or { fresh = {}, posted = {} }
    local posted = 0
    for i, e in ipairs(entries) do
      if outcomes[i] == nil and done.fresh[e] then
        if done.posted[e.msg.id] == e then
          posted = posted + 1
        else -- its payment id was in the ledger already: another entry carried it
          outcomes[i] = ls.reject("payment " .. e.msg.id .. " is in the ledger already (another entry)")
        end
      end
    end
    ls.log.info("payments posted", { entries = #entries, posted = posted })
    return ls.ack(), outcomes
  end,
}
