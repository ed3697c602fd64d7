-- The ledger of handlers/post_payment.lua, kept in PostgreSQL: each payment
-- becomes a row of `ledger` and moves its account's balance in `balances`
-- (schema.sql), exactly once. ctx:pg_once records the entry in the same
-- transaction as the two writes, so a payment delivered again (its worker
-- crashed after the commit, before the ack) finds itself recorded and is
-- only acked.
--
-- Run it with the server named: `luastream run --postgres URL
-- handlers/postgres` (or LUASTREAM_POSTGRES, or libpq's PG* variables), after
-- `psql -f handlers/postgres/schema.sql`.
local ls = require "luastream"

local MIN_IDLE = 30000 -- ms
local backoff = ls.backoff { base = "1s", max = "1m", jitter = 0.2 }

local function valid(p)
  return type(p.id) == "number" and p.id % 1 == 0 and type(p.account) == "string" and type(p.amount_cents) == "number"
    and p.amount_cents % 1 == 0 and math.abs(p.amount_cents) <= 2^53
end

return {
  stream = "payments",
  group = "ledger-pg",
  read = "claiming",
  -- Redis before 8.4 claims through a script; 8.4 and later natively.
  claim_fallback = true,
  min_idle = MIN_IDLE,
  workers = 8,
  by_key = true,
  max_deliveries = 10,
  dead_letter = "payments.dead",
  -- What a payment on the stream is (docs/handlers.md, "Message schemas").
  -- amount_cents is any number here: a fraction is a payment the ledger
  -- cannot post, rejected by valid() rather than left pending as bad
  -- input.
  schema = {
    type = "object",
    required = { "id", "amount_cents" },
    properties = {
      id = { type = { "integer", "string" }, description = "the producer's id of the payment" },
      account = { type = "string", minLength = 1, description = "the paying account, also the partition key" },
      amount_cents = { type = "number", description = "the amount in cents; negative for a refund" },
    },
  },

  handle = function(payment, ctx)
    if not valid(payment) then
      return ls.reject("a payment needs a whole id, an account and a whole amount_cents")
    end
    -- The two writes need no result: tx:exec sends them with the COMMIT (the
    -- entry's record goes with the BEGIN), two round trips in all. Either
    -- failing fails the COMMIT, and nothing is written.
    local ran, err, sqlstate = ctx:pg_once(function(tx)
      tx:exec("INSERT INTO ledger (payment_id, account, amount_cents) VALUES ($1, $2, $3)",
        payment.id, payment.account, payment.amount_cents)
      return tx:exec("INSERT INTO balances (account, cents) VALUES ($1, $2) "
          .. "ON CONFLICT (account) DO UPDATE SET cents = balances.cents + EXCLUDED.cents",
        payment.account, payment.amount_cents)
    end)
    if sqlstate == "23505" then
      -- unique_violation: another entry carried this payment id and posted
      -- it: not this one
      return ls.reject("payment " .. payment.id .. " is in the ledger already (another entry)")
    elseif ran == nil then
      -- no database, a timeout, a serialisation failure: nothing was written; try later
      ls.log.warn("ledger write failed, retrying", { payment_id = payment.id, error = err })
      return ls.retry_after(backoff(ctx))
    end
    ls.log.info(ran and "payment posted" or "payment was posted before",
      { payment_id = payment.id, account = payment.account })
    return ls.ack()
  end,
}
