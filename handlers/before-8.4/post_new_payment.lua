-- The ledger group posts each new payment to a ledger in Redis (balance in
-- hash ledger:balances, history in list ledger:history:<account>) and replies
-- on payments.posted. The writes and the reply are applied with the ack, and
-- only if that ack took the payment off the pending list: a payment is posted
-- once even when recover_payment.lua took it over from a stalled worker and
-- both finish it. Eight lanes keyed by account (the partition-key header)
-- post one account's payments in stream order while different accounts
-- proceed in parallel.
local ls = require "luastream"

-- What HINCRBY accepts. Checked before anything is queued: a write Redis
-- refuses after the ack is logged, not retried.
local function valid(p)
  return p.id ~= nil and type(p.account) == "string" and type(p.amount_cents) == "number"
    and p.amount_cents % 1 == 0 and math.abs(p.amount_cents) <= 2^53
end

return {
  stream = "payments",
  group = "ledger",
  -- As recover_payment.lua's: the payments running here are kept from it
  -- (re-stamped every min_idle / 3) however long they take.
  min_idle = 30000,
  workers = 8,
  by_key = true,
  reply_to = "payments.posted",
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
      return ls.reject("a payment needs an id, an account and a whole amount_cents")
    end
    ctx:write("HINCRBY", "ledger:balances", payment.account, payment.amount_cents)
    ctx:write("RPUSH", "ledger:history:" .. payment.account, payment.id)
    ls.log.info("payment posted", { payment_id = payment.id, account = payment.account })
    return ls.reply({ payment_id = payment.id, account = payment.account })
  end,
}
