-- The ledger of handlers/post_payment.lua, named for Redis Cluster. Every key
-- an outcome writes together (the stream, its retry stream and delay set, the
-- replies, the dead letters, the ledger writes) carries the hash tag
-- {payments}, so all of them live in one hash slot, on one master: the ack
-- and the writes stay one atomic step there. `luastream check --cluster`
-- checks the handler's own names; ctx:write refuses a key of another slot.
--
-- One slot is one master's work: to spread payments over every master, see
-- the partitioned streams in docs/operations.md ("Redis Cluster").
local ls = require "luastream"

local MIN_IDLE = 30000 -- ms

local function valid(p)
  return p.id ~= nil and type(p.account) == "string" and type(p.amount_cents) == "number"
    and p.amount_cents % 1 == 0 and math.abs(p.amount_cents) <= 2^53
end

return {
  stream = "{payments}",
  group = "ledger",
  read = "claiming",
  -- Redis before 8.4 claims through a script; 8.4 and later natively.
  claim_fallback = true,
  min_idle = MIN_IDLE,
  workers = 8,
  by_key = true,
  reply_to = "{payments}.posted",
  dead_letter = "{payments}.dead",
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
  max_deliveries = 5,

  handle = function(payment, ctx)
    if not valid(payment) then
      return ls.reject("a payment needs an id, an account and a whole amount_cents")
    end
    ctx:write("HINCRBY", "{payments}:ledger:balances", payment.account, payment.amount_cents)
    ctx:write("RPUSH", "{payments}:ledger:history:" .. payment.account, payment.id)
    ls.log.info("payment posted", { payment_id = payment.id, account = payment.account })
    return ls.reply({ payment_id = payment.id, account = payment.account })
  end,
}
