-- Handler files that cannot run: `luastream check` and `luastream run` refuse
-- them with `file:line: message` naming the field, and `run` creates nothing
-- in Redis (every file is validated before any group is joined).
local helper = require "tests.integration.helper"

local GOOD = [[
local ls = require "luastream"

return {
  stream = "payments", group = "good",
  handle = function(payment)
    ls.log.info("payment posted", { payment_id = payment.id })
  end,
}
]]

local CASES = {
  {
    what = "a syntax error",
    file = "syntax_error.lua",
    src = 'return {\n  stream = "payments", group = "bad",\n  handle = function(p) return end,\n',
  },
  {
    what = "a missing handle",
    file = "no_handle.lua",
    field = "handle",
    src = 'return {\n  stream = "payments",\n  group = "bad",\n}\n',
  },
  {
    what = "an unknown field",
    file = "typo.lua",
    field = "wokers",
    src = 'return {\n  stream = "payments", group = "bad",\n  wokers = 8,\n  handle = function() end,\n}\n',
  },
  {
    what = "a field of the wrong type",
    file = "wrong_type.lua",
    field = "workers",
    src = 'return {\n  stream = "payments", group = "bad",\n  workers = "eight",\n  handle = function() end,\n}\n',
  },
  {
    what = "more lanes than the host allows",
    file = "too_many_workers.lua",
    field = "workers",
    says = "must be at most 1024, got 100000000",
    src = 'return {\n  stream = "payments", group = "bad",\n  workers = 100000000,\n  handle = function() end,\n}\n',
  },
  {
    what = "a batch larger than the host reads at once",
    file = "huge_batch.lua",
    field = "batch",
    says = "must be at most 10000, got 1000000",
    src = 'return {\n  stream = "payments", group = "bad",\n  batch = 1000000,\n  handle = function() end,\n}\n',
  },
  {
    what = "a delivery cap of 0",
    file = "zero_cap.lua",
    field = "max_deliveries",
    says = "must be a positive integer, or false for no cap",
    src = 'return {\n  stream = "payments", group = "bad",\n  max_deliveries = 0,\n  handle = function() end,\n}\n',
  },
  {
    what = "handle and handle_batch both set",
    file = "both_handles.lua",
    field = "handle_batch",
    says = "set together: a handler file sets exactly one of 'handle', 'handle_batch', 'tick'",
    src = 'return {\n  stream = "payments", group = "bad",\n  handle = function() end,\n' ..
      '  handle_batch = function() end,\n}\n',
  },
  {
    what = "calls larger than a read",
    file = "big_calls.lua",
    field = "batch_max",
    says = "must be at most batch (10), got 50",
    src = 'return {\n  stream = "payments", group = "bad", batch = 10,\n  batch_max = 50,\n' ..
      '  handle_batch = function() end,\n}\n',
  },
}

-- The stderr line that reports `case`: `<file>:<line>:` and its field name.
local function problem_line(stderr, case)
  local pattern = case.file:gsub("%.", "%%.") .. ":%d+:"
  for line in stderr:gmatch("[^\n]+") do
    if line:find(pattern) and (not case.field or line:find(case.field, 1, true)) and
        (not case.says or line:find(case.says, 1, true)) then
      return line
    end
  end
  return nil
end

local function assert_reported(stderr, case)
  assert(problem_line(stderr, case), string.format("no `%s:LINE:` line%s%s for %s on stderr:\n%s",
    case.file, case.field and (" naming " .. case.field) or "", case.says and (" saying " .. case.says) or "",
    case.what, stderr))
end

describe("bad handler files", function()
  after_each(helper.cleanup)

  for _, case in ipairs(CASES) do
    it("check refuses " .. case.what .. " with file:line and the field", function()
      local dir = helper.handlers_dir({ ["a_good.lua"] = GOOD, [case.file] = case.src })
      local code, _, stderr = helper.luastream("check", dir)
      assert.is_not.equal(0, code)
      assert_reported(stderr, case)
      assert.is_falsy(stderr:find("a_good.lua:%d+:"), "the good file was reported:\n" .. stderr)
    end)

    it("run refuses " .. case.what .. " and joins no group", function()
      local srv = helper.redis_start()
      local dir = helper.handlers_dir({ ["a_good.lua"] = GOOD, [case.file] = case.src })
      local code, stdout, stderr = helper.luastream("run", "--redis", srv.url, dir, { timeout = 20 })
      assert.is_not.equal(0, code)
      assert_reported(stdout .. stderr, case)
      assert.equal(0, srv:call("EXISTS", "payments"))
      assert.equal(0, srv:call("DBSIZE"))
    end)
  end

  it("check reports every bad file, one line each", function()
    local files = { ["a_good.lua"] = GOOD }
    for _, case in ipairs(CASES) do files[case.file] = case.src end
    local code, _, stderr = helper.luastream("check", helper.handlers_dir(files))
    assert.is_not.equal(0, code)
    for _, case in ipairs(CASES) do
      assert_reported(stderr, case)
      local n = 0
      for line in stderr:gmatch("[^\n]+") do
        if line:find(case.file, 1, true) then n = n + 1 end
      end
      assert.equal(1, n, "lines naming " .. case.file .. ":\n" .. stderr)
    end
  end)

  it("check accepts the shipped examples", function()
    for _, dir in ipairs { "handlers", "handlers/before-8.4", "handlers/postgres_batch" } do
      local code, stdout, stderr = helper.luastream("check", helper.repo_root .. "/" .. dir)
      assert.equal(0, code, dir .. ":\n" .. stdout .. stderr)
    end
  end)
end)
