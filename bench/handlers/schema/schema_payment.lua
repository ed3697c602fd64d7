-- schema_payment: bench/handlers/ack_payment.lua with the payments example's
-- schema (handlers/screen_payment.lua): what checking each payment against
-- it costs (bench/instructions, scenario schema). A payment that did not
-- match would be left pending (no dead_letter), which bench/cost refuses.
local ls = require "luastream"

local total = 0 -- the field read, kept so that the read is not optimised away

return {
  stream = os.getenv("BENCH_STREAM") or "bench",
  group = os.getenv("BENCH_GROUP") or "bench",
  batch = tonumber(os.getenv("BENCH_BATCH") or "100"),
  schema = {
    type = "object",
    required = { "id", "amount_cents" },
    properties = {
      id = { type = { "integer", "string" }, description = "the producer's id of the payment" },
      account = { type = "string", minLength = 1, description = "the paying account, also the partition key" },
      amount_cents = { type = "integer", description = "the amount in cents; negative for a refund" },
    },
  },
  handle = function(payment)
    total = total + payment.amount_cents
    return ls.ack()
  end,
}
