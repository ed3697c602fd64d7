-- Large test bodies, the same for the harness and the integration specs.
local M = {}

-- A JSON body of exactly n bytes, {"id":ID,"note":"..."} ({"note":"..."}
-- without id), and the note it decodes to: letters with an escaped newline,
-- quote and "é" every 1000 bytes, and a raw two-byte UTF-8 character (not
-- escaped) in each of those pieces.
function M.json(n, id)
  local head, tail = id and string.format('{"id":%d,"note":"', id) or '{"note":"', '"}'
  local text = string.rep("abcdefghij", 98) .. "\195\169" .. "abcd" .. '\\n\\"\\u00e9' -- 1000 bytes
  local value = string.rep("abcdefghij", 98) .. "\195\169" .. "abcd" .. '\n"\195\169'
  local fill = n - #head - #tail
  local k, r = math.floor(fill / #text), fill % #text
  local body = head .. string.rep(text, k) .. string.rep("x", r) .. tail
  assert(#body == n)
  return body, string.rep(value, k) .. string.rep("x", r)
end

-- n bytes of every byte value in turn, NUL included.
function M.binary(n)
  local all = {}
  for b = 0, 255 do all[#all + 1] = string.char(b) end
  all = table.concat(all)
  return string.rep(all, math.floor(n / 256)) .. all:sub(1, n % 256)
end

return M
