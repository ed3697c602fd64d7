-- The ledger group posts each payment to a ledger in Redis: the account's
-- balance (hash ledger:balances, in cents) and its history (list
-- ledger:history:<account>), and replies on payments.posted. ctx:write queues
-- a write; the host applies the writes and the reply with the ack, and only if
-- that ack took the payment off the pending list, so a payment is posted once
-- even when a stalled worker and the one that took over both finish it.
-- One claiming read takes the payments that a stopped worker left pending
-- (idle at least MIN_IDLE) and then new ones, so the subscription that posts
-- new payments also recovers abandoned ones. Needs Redis 8.4 or later;
-- before-8.4/ holds the same service for older servers.
local ls = require "luastream"

-- How long a stopped worker's payments wait before another takes them over.
-- Not a limit on a posting: the host keeps the payments it holds from going
-- idle (every MIN_IDLE / 3), however long they take.
local MIN_IDLE = 30000 -- ms

-- What HINCRBY accepts. Checked before anything is queued: a write Redis
-- refuses after the ack is logged, not retried.
local function valid(p)
  return p.id ~= nil and type(p.account) == "string" and type(p.amount_cents) == "number"
    and p.amount_cents % 1 == 0 and math.abs(p.amount_cents) <= 2^53
end

return {
  stream = "payments",
  group = "ledger",
  read = "claiming",
  min_idle = MIN_IDLE,
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
    local earlier_deliveries = ctx.headers[ls.DELIVERY_COUNT_HEADER] or "0"
    if not valid(payment) then
      return ls.reject("a payment needs an id, an account and a whole amount_cents")
    end
    if payment.account:find("^migrating%-") then
      ls.log.warn("account locked, payment left pending",
        { payment_id = payment.id, earlier_deliveries = earlier_deliveries })
      return ls.retry()
    end
    -- queued, applied with the ack (see docs/handlers.md, ctx:write)
    ctx:write("HINCRBY", "ledger:balances", payment.account, payment.amount_cents)
    ctx:write("RPUSH", "ledger:history:" .. payment.account, payment.id)
    ls.log.info("payment posted", { payment_id = payment.id, earlier_deliveries = earlier_deliveries })
    return ls.reply({ payment_id = payment.id, account = payment.account })
  end,
}
