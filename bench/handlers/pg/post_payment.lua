-- post_payment: bench/pg's handler. Each payment goes into the ledger table
-- exactly once: ctx:pg_once records the entry's key and runs one INSERT in
-- the same transaction, as bench/pg_client.c does by hand: the key with the
-- BEGIN, the row (tx:exec) with the COMMIT, two round trips; with
-- BENCH_PG_WRITE=query the row goes by tx:query, three. BENCH_STREAM,
-- BENCH_GROUP, BENCH_WORKERS and BENCH_PG_WRITE come from bench/pg.
local ls = require "luastream"

local WRITE = os.getenv("BENCH_PG_WRITE") or "exec"

return {
  stream = os.getenv("BENCH_STREAM") or "bench",
  group = os.getenv("BENCH_GROUP") or "bench",
  workers = tonumber(os.getenv("BENCH_WORKERS") or "32"),
  batch = 500,
  handle = function(payment, ctx)
    local ran, err = ctx:pg_once(function(tx)
      local sql = "INSERT INTO ledger (payment_id, account, amount_cents) VALUES ($1, $2, $3)"
      if WRITE == "query" then -- a round trip of its own, the result in hand
        local rows, why = tx:query(sql, payment.id, payment.account, payment.amount_cents)
        if not rows then return nil, why end
        return true
      end
      -- no result needed: the row goes with the COMMIT, in one round trip
      return tx:exec(sql, payment.id, payment.account, payment.amount_cents)
    end)
    if ran == nil then error(err) end -- left pending: the bench counts it as a failure
    return ls.ack()
  end,
}
