-- payments_b: one of bench/memory's two subscriptions (_payments.lua).
return require("_payments")("b")
