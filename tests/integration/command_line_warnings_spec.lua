-- Warnings about `run`'s command line (a password ps can show, a URL file
-- others can read) are log lines in the log's format: with --log-format json
-- every line on stderr is JSON; a password in --postgres is warned of as one
-- in --redis is.
local helper = require "tests.integration.helper"
local cjson = require "cjson"

local SECRET = "s3cret-pw"

-- Every line of text as a JSON object (fails naming a line that is not one).
local function json_lines(text)
  local out = {}
  for line in text:gmatch("[^\n]+") do
    local ok, obj = pcall(cjson.decode, line)
    assert(ok and type(obj) == "table", "not a JSON line: " .. line)
    out[#out + 1] = obj
  end
  return out
end

local function warnings(objs)
  local out = {}
  for _, o in ipairs(objs) do
    if o.level == "warn" then out[#out + 1] = o.msg end
  end
  return out
end

describe("run's command-line warnings", function()
  after_each(helper.cleanup)

  it("are JSON with --log-format json, and a --postgres password is warned of", function()
    local missing = helper.tmpdir("gone") .. "/handlers"
    local code, out, err = helper.luastream("run", "--log-format", "json",
      "--redis", "redis://:" .. SECRET .. "@127.0.0.1:1",
      "--postgres", "host=127.0.0.1 port=1 dbname=x password=" .. SECRET, missing)
    assert.equal(1, code)
    assert.equal("", out)
    local objs = json_lines(err)
    local warned = warnings(objs)
    assert.same({
      "the password in --redis can be seen by every user of this machine (ps): use " ..
        "--redis-file PATH or REDIS_URL instead",
      "the password in --postgres can be seen by every user of this machine (ps): use " ..
        "LUASTREAM_POSTGRES, PGPASSWORD or a PGPASSFILE instead",
    }, warned)
    helper.assert_no_secret(SECRET, err)
    -- the load problem is a record too
    local found = false
    for _, o in ipairs(objs) do
      if o.msg == "load problem" and o.error:find(missing, 1, true) then found = true end
    end
    assert.is_true(found, err)
  end)

  it("a readable --redis-file is a JSON warning too", function()
    local conf = helper.tmpdir("conf") .. "/url"
    helper.write_file(conf, "redis://:" .. SECRET .. "@127.0.0.1:1\n")
    local _, _, err = helper.luastream("run", "--log-format", "json", "--redis-file", conf,
      helper.tmpdir("gone") .. "/handlers")
    local warned = warnings(json_lines(err))
    assert.same({ "--redis-file " .. conf .. " can be read by every user (mode 644): chmod 600 it" }, warned)
  end)

  it("why the host could not start is JSON too (a refused password, a bad --http-ca-file)", function()
    local srv = helper.redis_start({ requirepass = "right" })
    local dir = helper.handlers_dir({ ["post.lua"] = 'return { stream = "s", group = "g", ' ..
      'handle = function() return { ack = true } end }' })
    local conf = helper.tmpdir("conf") .. "/url"
    helper.write_file(conf, "redis://:wrong@127.0.0.1:" .. srv.port .. "\n")
    local code, out, err = helper.luastream("run", "--log-format", "json", "--redis-file", conf, dir)
    assert.equal(1, code, err)
    assert.equal("", out)
    local failed
    for _, o in ipairs(json_lines(err)) do
      if o.msg == "host failed" then failed = o end
    end
    assert.truthy(failed, err)
    assert.matches("cannot start: .* refused: ", failed.error)
    code, out, err = helper.luastream("run", "--log-format", "json", "--redis", srv.url,
      "--http-ca-file", helper.tmpdir("ca") .. "/missing.pem", dir)
    assert.equal(1, code, err)
    assert.equal("", out)
    local said = json_lines(err)
    assert.matches("%-%-http%-ca%-file .*missing%.pem: cannot be read", said[#said].msg)
  end)

  it("a --postgres password is warned of in logfmt; one from LUASTREAM_POSTGRES is not", function()
    local missing = helper.tmpdir("gone") .. "/handlers"
    local _, _, err = helper.luastream("run", "--redis", "redis://127.0.0.1:1",
      "--postgres", "postgresql://ls:" .. SECRET .. "@127.0.0.1:1/x", missing)
    assert.matches('level=warn msg="the password in --postgres can be seen by every user of this machine (ps)',
      err, 1, true)
    helper.assert_no_secret(SECRET, err)
    _, _, err = helper.luastream("run", "--redis", "redis://127.0.0.1:1", missing,
      { env = { LUASTREAM_POSTGRES = "postgresql://ls:" .. SECRET .. "@127.0.0.1:1/x" } })
    assert.falsy(err:find("the password in", 1, true), err)
    _, _, err = helper.luastream("run", "--redis", "redis://127.0.0.1:1",
      "--postgres", "host=127.0.0.1 port=1 dbname=x", missing)
    assert.falsy(err:find("the password in", 1, true), err)
  end)
end)
