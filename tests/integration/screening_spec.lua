-- The payments example (handlers/before-8.4, run as shipped): every payment is
-- screened exactly once, including payments added before the fraud group existed,
-- and each reply names the payment it answers.
local helper = require "tests.integration.helper"
local cjson = require "cjson"

local EXAMPLES = helper.repo_root .. "/handlers/before-8.4"
local READY = 'msg="host ready"'

describe("screening payments with the example handlers", function()
  after_each(helper.cleanup)

  it("screens every payment exactly once and replies with original-id", function()
    local srv = helper.redis_start()
    local payments = {} -- entry id -> the payment
    local function pay(id, account, cents)
      local entry_id = helper.publish(srv, "payments", helper.payment(id, account, cents), { key = account })
      payments[entry_id] = { id = id, amount_cents = cents }
    end

    -- before the host runs: the fraud group does not exist yet
    pay(1, "acme", 500)
    pay(2, "globex", 2500000)
    pay(3, "initech", 12000)
    assert.is_nil(srv:group("payments", "fraud"))

    local host = helper.host_start({}, { server = srv, dir = EXAMPLES })
    host:wait_log(READY, 20, { plain = true })
    pay(4, "acme", 700)
    pay(5, "globex", 1500000)
    pay(6, "acme", 99)

    helper.wait_until(function()
      local n = srv:xlen("payments.screened")
      return n >= 6, n .. " replies"
    end, 20, "6 replies on payments.screened")
    helper.wait_until(function()
      local g = srv:group("payments", "fraud")
      return g and g.pending == 0, g and ("pending " .. g.pending)
    end, 10, "the fraud group to ack every payment")
    assert.equal(0, host:stop())

    local replies = srv:xrange("payments.screened")
    assert.equal(6, #replies)
    local answered = {}
    for _, reply in ipairs(replies) do
      local original = reply.fields["original-id"]
      local payment = payments[original]
      assert(payment, "reply for an unknown entry: " .. tostring(original))
      assert(not answered[original], "payment entry screened twice: " .. original)
      answered[original] = true
      local body = cjson.decode(reply.fields.data)
      assert.equal(payment.id, body.payment_id)
      assert.equal(payment.amount_cents > 1000000, body.suspicious)
    end
    assert.same({}, (srv:pending_ids("payments", "fraud")))
  end)
end)
