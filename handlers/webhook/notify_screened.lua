-- Tells a webhook of every screened payment: the replies screen_payment.lua
-- writes on payments.screened, POSTed as JSON to WEBHOOK_URL. Each request
-- carries the entry's idempotency key, the same on every delivery of that
-- reply, so a receiver that honours Idempotency-Key acts once even when a
-- timeout makes this handler send it again. A receiver that says it is
-- down (503 or 429) pauses the group on every host for its Retry-After (at
-- most max_pause) instead of spending each payment's deliveries; then one
-- payment probes. Run it beside handlers/:
--
--   WEBHOOK_URL=https://hooks.example.com/screened luastream run handlers/webhook
local ls = require "luastream"

local WEBHOOK_URL = os.getenv("WEBHOOK_URL") or "http://127.0.0.1:8080/screened"
local backoff = ls.backoff { base = "1s", max = "5m", jitter = 0.2 }

return {
  stream = "payments.screened",
  group = "webhook",
  start = "beginning",
  workers = 16,                       -- 16 requests in flight at once
  max_deliveries = 20,                -- about an hour of backoff, then a dead letter
  dead_letter = "payments.screened.dead",
  breaker = { max_pause = "5m" },     -- the longest pause a Retry-After may ask for

  handle = function(screened, ctx)
    local res, err = ls.http.post(WEBHOOK_URL, {
      json = screened,
      headers = { ["Idempotency-Key"] = ctx.idempotency_key },
      timeout = "5s",
    })
    if not res then -- no answer: it may or may not have arrived; the key makes a resend safe
      ls.log.warn("webhook unreachable", { payment_id = screened.payment_id, error = err })
      return ls.retry_after(backoff(ctx))
    end
    if res.status == 503 or res.status == 429 then -- down or over its quota: every payment would fail
      return ls.pause(res.retry_after or "30s", "webhook answered " .. res.status)
    end
    if res.status >= 500 then
      return ls.retry_after(backoff(ctx))
    end
    if res.status >= 400 then -- the receiver refuses this one: no point sending it again
      return ls.reject("webhook answered " .. res.status .. ": " .. res.body:sub(1, 200))
    end
    ls.log.info("webhook notified", { payment_id = screened.payment_id, status = res.status })
    return ls.ack()
  end,
}
