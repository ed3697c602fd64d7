-- crc16: CRC-16/XMODEM (polynomial 0x1021, initial value 0), the hash of
-- partitions and of Redis Cluster slots, written out here rather than taken
-- from the host, so that a wrong hash in the host fails the specs using it.
local bit = require "bit"

return function(s)
  local crc = 0
  for i = 1, #s do
    crc = bit.bxor(crc, bit.lshift(s:byte(i), 8))
    for _ = 1, 8 do
      if bit.band(crc, 0x8000) ~= 0 then
        crc = bit.band(bit.bxor(bit.lshift(crc, 1), 0x1021), 0xffff)
      else
        crc = bit.band(bit.lshift(crc, 1), 0xffff)
      end
    end
  end
  return crc
end
