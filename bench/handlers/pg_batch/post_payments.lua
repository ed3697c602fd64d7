-- post_payments: bench/pg's batch handler (client "batch"). The ledger of
-- bench/handlers/pg, a call of up to BENCH_BATCH_MAX (100) entries at a
-- time: ctx:pg_once_batch records every entry's key in one INSERT with the
-- BEGIN, and the fresh entries' rows go in one multi-row INSERT (tx:exec)
-- with the COMMIT: two round trips per call. BENCH_STREAM, BENCH_GROUP,
-- BENCH_WORKERS and BENCH_BATCH_MAX come from bench/pg.
local BATCH_MAX = tonumber(os.getenv("BENCH_BATCH_MAX") or "100")

-- "($1, $2, $3), ($4, $5, $6), ..." for n rows, made once per n.
local values = setmetatable({}, { __index = function(t, n)
  local rows = {}
  for r = 1, n do rows[r] = string.format("($%d, $%d, $%d)", 3 * r - 2, 3 * r - 1, 3 * r) end
  local sql = "INSERT INTO ledger (payment_id, account, amount_cents) VALUES " .. table.concat(rows, ", ")
  t[n] = sql
  return sql
end })

local function post(tx, fresh)
  local args = {}
  for i, e in ipairs(fresh) do
    local p = e.msg
    args[3 * i - 2], args[3 * i - 1], args[3 * i] = p.id, p.account, p.amount_cents
  end
  return tx:exec(values[#fresh], unpack(args, 1, 3 * #fresh))
end

return {
  stream = os.getenv("BENCH_STREAM") or "bench",
  group = os.getenv("BENCH_GROUP") or "bench",
  workers = tonumber(os.getenv("BENCH_WORKERS") or "32"),
  batch = 500,
  batch_max = BATCH_MAX,
  handle_batch = function(entries, ctx)
    local ran, err = ctx:pg_once_batch(entries, post)
    if ran == nil then error(err) end -- left pending: the bench counts it as a failure
  end,
}
