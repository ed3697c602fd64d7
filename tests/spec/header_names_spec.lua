-- ls.<NAME>_HEADER: the header names luastream uses, from the host's own
-- table; a misspelt one raises rather than reading as nil.
local ls = require "luastream"

describe("ls.<NAME>_HEADER", function()
  it("gives the header names the host uses", function()
    assert.equal("delivery-count", ls.DELIVERY_COUNT_HEADER)
    assert.equal("partition-key", ls.PARTITION_KEY_HEADER)
    assert.equal("original-id", ls.ORIGINAL_ID_HEADER)
  end)

  it("raises on a name it does not have, naming it and the ones it has", function()
    local ok, err = pcall(function() return ls.DELIVERY_CONT_HEADER end)
    assert.is_false(ok)
    assert.matches("ls.DELIVERY_CONT_HEADER is not a header luastream uses", err, 1, true)
    assert.matches("ls.DELIVERY_COUNT_HEADER", err, 1, true)
    -- and again: a failed look-up is not remembered as nil
    assert.has_error(function() return ls.DELIVERY_CONT_HEADER end)
  end)

  it("leaves other missing fields nil", function()
    assert.is_nil(ls.no_such_function)
  end)
end)
