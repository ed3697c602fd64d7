-- payments: stream ids and the payment entries the examples consume.
local payments = {}

--- Compares two stream ids "ms-seq": -1, 0 or 1.
function payments.id_cmp(a, b)
  local am, as = a:match("^(%d+)-(%d+)$")
  local bm, bs = b:match("^(%d+)-(%d+)$")
  am, as, bm, bs = tonumber(am), tonumber(as), tonumber(bm), tonumber(bs)
  if am ~= bm then return am < bm and -1 or 1 end
  if as ~= bs then return as < bs and -1 or 1 end
  return 0
end

-- ---- payments ------------------------------------------------------------

--- A payment body as the examples expect it.
function payments.payment(id, account, amount_cents)
  return string.format('{"id":%d,"account":"%s","amount_cents":%d}', id, account, amount_cents or 500)
end

--- The account of payment `id` when payments go round-robin over `accounts`:
--- a count (acct-1, acct-2, ...) or a list of names.
function payments.account_of(id, accounts)
  if type(accounts) == "table" then return accounts[(id - 1) % #accounts + 1] end
  return "acct-" .. ((id - 1) % accounts + 1)
end

--- XADD commands for payments first..last round-robin over `accounts` (see
--- account_of), keyed by account; for Server:pipe.
function payments.payment_commands(first, last, accounts, stream)
  local cmds = {}
  for id = first, last do
    local account = payments.account_of(id, accounts)
    cmds[#cmds + 1] = { "XADD", stream or "payments", "*", "data", payments.payment(id, account, 100 + id), "partition-key", account }
  end
  return cmds
end

--- The XADD of payment i of the fault specs: round robin over `accounts`,
--- an amount spread by i, every tenth a refund, keyed by account.
function payments.payment_xadd(i, accounts)
  local account = payments.account_of(i, accounts)
  local cents = (i * 7919) % 200000 + 1
  if i % 10 == 0 then cents = -cents end
  return { "XADD", "payments", "*", "data", payments.payment(i, account, cents), "partition-key", account }
end

return payments
