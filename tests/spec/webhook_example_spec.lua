-- The webhook example (handlers/webhook/notify_screened.lua) beside the
-- payments example it listens to, with the webhook stubbed on the paused
-- clock: one POST per screened payment with its idempotency key, the same
-- key when a failing receiver makes it send again, a refusal dead-lettered,
-- a receiver that is down (503) pausing the group until a probe gets through.
local testing = require "luastream.testing"

local ROOT = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") .. "/../.."
local HOOK = os.getenv("WEBHOOK_URL") or "http://127.0.0.1:8080/screened"

local function apps()
  local payments = testing.app(ROOT .. "/handlers")
  local webhook = testing.app(ROOT .. "/handlers/webhook", { with = payments })
  return payments, webhook
end

local function pay(app, id, cents)
  return app:publish("payments", { id = id, account = "acme", amount_cents = cents }, { key = "acme" })
end

describe("the webhook example", function()
  local payments, webhook
  after_each(function()
    if webhook then webhook:stop() end
    if payments then payments:stop() end
    payments, webhook = nil, nil
  end)

  it("POSTs each screened payment once, keyed by its reply entry", function()
    payments, webhook = apps()
    webhook:http_stub("POST", HOOK, { status = 204 })
    pay(payments, 1, 500)
    pay(payments, 2, 2000000)
    webhook:settle()

    local reqs = webhook:http_requests()
    assert.equal(2, #reqs)
    local replies = payments:entries("payments.screened")
    for i, req in ipairs(reqs) do
      assert.equal("POST", req.method)
      assert.equal(HOOK, req.url)
      assert.equal("application/json", req.headers["content-type"])
      assert.equal("payments.screened/webhook/" .. replies[i].id, req.headers["idempotency-key"])
    end
    assert.same({ payment_id = 1, suspicious = false }, reqs[1].json)
    assert.same({ payment_id = 2, suspicious = true }, reqs[2].json)
    local got = webhook:received("notify_screened")
    assert.equal("ack", got[1].outcome)
    assert.equal("ack", got[2].outcome)
    assert.same({}, webhook:pending("payments.screened", "webhook"))
  end)

  it("sends again with the same key after the receiver failed, once its backoff passed", function()
    payments, webhook = apps()
    webhook:http_stub("POST", HOOK, { status = 500 })
    pay(payments, 3, 500)
    webhook:settle()
    assert.equal(1, #webhook:http_requests())
    webhook:advance(700) -- the first delay is 1 s +/- 20 %
    assert.equal(1, #webhook:http_requests())

    webhook:http_stub("POST", HOOK, { status = 200 })
    webhook:advance(600)
    local reqs = webhook:http_requests()
    assert.equal(2, #reqs)
    assert.equal(reqs[1].headers["idempotency-key"], reqs[2].headers["idempotency-key"])
    assert.same({}, webhook:pending("payments.screened", "webhook"))
    assert.equal(0, webhook:command("ZCARD", "payments.screened:delayed:webhook"))
  end)

  it("pauses the group for the receiver's Retry-After when it is down, then one payment probes", function()
    payments, webhook = apps()
    webhook:http_stub("POST", HOOK, { status = 503, headers = { ["Retry-After"] = "20" } })
    pay(payments, 5, 500)
    pay(payments, 6, 500)
    pay(payments, 7, 500)
    webhook:settle()
    local opened = webhook:records("breaker opened: the group pauses on every host")
    assert.equal(1, #opened)
    assert.equal("20000ms", opened[1].pause)
    assert.equal("webhook answered 503", opened[1].reason)
    local sent = #webhook:http_requests()

    webhook:http_stub("POST", HOOK, { status = 204 })
    for _ = 1, 190 do webhook:advance(100) end
    assert.equal(sent, #webhook:http_requests(), "nothing sent while paused")
    for _ = 1, 50 do webhook:advance(100) end
    assert.equal(1, #webhook:records("breaker closed: the probe succeeded, every host resumes"))
    assert.equal(sent + 3, #webhook:http_requests(), "each payment sent once more")
    assert.same({}, webhook:pending("payments.screened", "webhook"))
    assert.equal(0, webhook:command("XLEN", "payments.screened.dead"))
    for _, got in ipairs(webhook:received("notify_screened")) do
      if got.outcome == "ack" then
        assert.equal("0", got.headers[require("luastream").DELIVERY_COUNT_HEADER] or "0", "the pause did not count")
      end
    end
  end)

  it("dead-letters a payment the receiver refuses", function()
    payments, webhook = apps()
    webhook:http_stub("POST", HOOK, { status = 422, body = "unknown payment" })
    pay(payments, 4, 500)
    webhook:settle()
    local dead = webhook:entries("payments.screened.dead")
    assert.equal(1, #dead)
    assert.equal("rejected", dead[1].fields["dead-letter-reason"])
    assert.equal("webhook answered 422: unknown payment", dead[1].fields["dead-letter-error"])
    assert.equal(1, #webhook:http_requests())
  end)
end)
