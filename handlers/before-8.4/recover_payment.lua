-- Recovery before Redis 8.4: a second subscription on the ledger group reads
-- only payments left pending for at least MIN_IDLE by a stopped worker
-- (XAUTOCLAIM), beside post_new_payment.lua, which reads the new ones, and
-- posts them the same way. If the stopped worker wakes up and finishes the
-- payment too, its ack finds the payment no longer pending and its writes and
-- reply are skipped: the payment is posted once.
local ls = require "luastream"

local MIN_IDLE = 30000 -- ms; how long a stopped worker's payments wait

-- What HINCRBY accepts (as in post_new_payment.lua).
local function valid(p)
  return p.id ~= nil and type(p.account) == "string" and type(p.amount_cents) == "number"
    and p.amount_cents % 1 == 0 and math.abs(p.amount_cents) <= 2^53
end

return {
  stream = "payments",
  group = "ledger",
  read = "reclaim",
  min_idle = MIN_IDLE,
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
    -- A reclaimed delivery counts itself: the first recovery reports at least 1.
    local deliveries = ctx.headers[ls.DELIVERY_COUNT_HEADER] or "1"
    ctx:write("HINCRBY", "ledger:balances", payment.account, payment.amount_cents)
    ctx:write("RPUSH", "ledger:history:" .. payment.account, payment.id)
    ls.log.warn("payment recovered from a stopped worker",
      { payment_id = payment.id, deliveries = deliveries })
    return ls.reply({ payment_id = payment.id, account = payment.account })
  end,
}
