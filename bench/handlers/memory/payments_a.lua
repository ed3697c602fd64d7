-- payments_a: one of bench/memory's two subscriptions (_payments.lua).
return require("_payments")("a")
