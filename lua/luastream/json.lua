-- luastream.json: the JSON encoder of ctx:publish, replies and log fields.
--
-- encode is the host's (host/runtime/json_encode.c, require "luastream.json_encode",
-- which a host and the luastream.testing harness provide): lua-cjson's
-- output, but every number reads back as the same double (cjson keeps 14
-- digits): integers as integers, without exponent, other numbers with the
-- fewest digits that read back the same; NaN and infinities are refused.
-- Errors come back as nil, message (cjson.safe's API).
--
-- decode is a private instance of lua-cjson's safe API, strict about numbers
-- (NaN, Infinity and hex are not JSON). Entry bodies are decoded by the host
-- in C (host/runtime/json_decode.c), which keeps integers above 2^53 as strings and
-- refuses numbers out of a double's range; cjson rounds those.
local json = require("cjson.safe").new()
json.decode_invalid_numbers(false)
json.encode_invalid_numbers(false)

local has_encoder, encode = pcall(require, "luastream.json_encode")
if has_encoder then
  json.encode = encode
else
  -- Outside a host and the harness (until it is loaded): cjson's rounding
  -- would change numbers, so nothing is encoded.
  json.encode = function(value)
    local ok, late = pcall(require, "luastream.json_encode")
    if not ok then
      return nil, "luastream.json: no encoder outside a luastream host or the luastream.testing harness"
    end
    json.encode = late
    return late(value)
  end
end
return json
