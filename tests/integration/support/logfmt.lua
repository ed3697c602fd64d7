-- logfmt: parsing the host's log lines and their time= values.
local logfmt = {}

local UNESCAPE = { n = "\n", t = "\t", r = "\r", ['"'] = '"', ["\\"] = "\\" }

--- Parses one logfmt line into {key = value}; quoted values are unescaped.
function logfmt.parse_logfmt(line)
  local rec, i, n = {}, 1, #line
  while i <= n do
    local s = line:find("[^ ]", i)
    if not s then break end
    local stop = line:find("[= ]", s) or n + 1
    local key = line:sub(s, stop - 1)
    if line:sub(stop, stop) ~= "=" then
      rec[key] = true
      i = stop
    elseif line:sub(stop + 1, stop + 1) == '"' then
      local buf, j = {}, stop + 2
      while j <= n do
        local k = line:find('[\\"]', j)
        if not k then
          buf[#buf + 1] = line:sub(j)
          j = n + 1
          break
        end
        buf[#buf + 1] = line:sub(j, k - 1)
        if line:sub(k, k) == '"' then
          j = k
          break
        end
        local e = line:sub(k + 1, k + 1)
        buf[#buf + 1] = UNESCAPE[e] or e
        j = k + 2
      end
      rec[key] = table.concat(buf)
      i = j + 1
    else
      local e = line:find(" ", stop + 1) or n + 1
      rec[key] = line:sub(stop + 1, e - 1)
      i = e
    end
  end
  return rec
end

--[[ Seconds (with fraction) from a log `time=` value, for differences only:
RFC 3339 / ISO 8601 (2024-05-01T12:00:00.123Z, +02:00, a space for T) or
epoch seconds. nil when the format is not recognised. ]]
function logfmt.parse_time(s)
  if not s then return nil end
  if s:match("^%d+%.?%d*$") then return tonumber(s) end
  local y, mo, d, h, mi, sec, frac = s:match("^(%d%d%d%d)-(%d%d)-(%d%d)[T ](%d%d):(%d%d):(%d%d)([.,]?%d*)")
  if not y then return nil end
  -- days from civil (proleptic Gregorian), so no time zone or DST is involved
  y, mo, d = tonumber(y), tonumber(mo), tonumber(d)
  if mo <= 2 then y = y - 1 end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local mp = (mo + 9) % 12
  local doy = math.floor((153 * mp + 2) / 5) + d - 1
  local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
  local days = era * 146097 + doe
  local t = days * 86400 + tonumber(h) * 3600 + tonumber(mi) * 60 + tonumber(sec)
  if #frac > 1 then t = t + tonumber("0." .. frac:sub(2)) end
  return t
end

return logfmt
