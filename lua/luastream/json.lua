-- luastream.json: the JSON encoder of ctx:publish, replies and log fields.
--
-- A private instance of lua-cjson's safe API (errors come back as nil, message),
-- strict about numbers: NaN, Infinity and hex are not JSON. Entry bodies are
-- decoded by the host in C (host/json_decode.c, with cjson's rules); decode
-- here gives the same values for code that needs one in Lua.
local json = require("cjson.safe").new()
json.decode_invalid_numbers(false)
json.encode_invalid_numbers(false)
return json
