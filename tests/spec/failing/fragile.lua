-- For the harness spec: fails on payments without an account.
return {
  stream = "payments",
  group = "ledger",
  handle = function(payment)
    local _ = payment.account:upper()
  end,
}
