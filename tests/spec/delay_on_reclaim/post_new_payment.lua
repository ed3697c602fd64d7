-- For the retries spec: the `new` half of a reclaim pair. It fails every
-- payment, leaving it pending for the reclaim half.
return {
  stream = "payments",
  group = "ledger",

  handle = function(payment)
    error("posting service down for payment " .. payment.id)
  end,
}
