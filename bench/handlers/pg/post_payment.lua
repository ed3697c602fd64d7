-- post_payment: bench/pg's handler. Each payment goes into the ledger table
-- exactly once: ctx:pg_once records the entry's key and runs one INSERT in
-- the same transaction, as bench/pg_client.c does by hand. BENCH_STREAM,
-- BENCH_GROUP and BENCH_WORKERS come from bench/pg.
local ls = require "luastream"

return {
  stream = os.getenv("BENCH_STREAM") or "bench",
  group = os.getenv("BENCH_GROUP") or "bench",
  workers = tonumber(os.getenv("BENCH_WORKERS") or "32"),
  batch = 500,
  handle = function(payment, ctx)
    local ran, err = ctx:pg_once(function(tx)
      local rows, why = tx:query("INSERT INTO ledger (payment_id, account, amount_cents) VALUES ($1, $2, $3)",
        payment.id, payment.account, payment.amount_cents)
      if not rows then return nil, why end
      return true
    end)
    if ran == nil then error(err) end -- left pending: the bench counts it as a failure
    return ls.ack()
  end,
}
