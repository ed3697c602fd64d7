-- luastream.json: the JSON codec every part of luastream uses.
--
-- A private instance of lua-cjson's safe API (errors come back as nil, message),
-- strict about numbers: NaN, Infinity and hex are not JSON, and a body that
-- other readers of the stream would reject is bad input here too.
local json = require("cjson.safe").new()
json.decode_invalid_numbers(false)
json.encode_invalid_numbers(false)
return json
