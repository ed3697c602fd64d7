-- For the forged-headers spec: the fraud screen, a second group on payments.
return {
  stream = "payments",
  group = "fraud",
  max_deliveries = 3,
  dead_letter = "payments.dead",

  handle = function() end,
}
