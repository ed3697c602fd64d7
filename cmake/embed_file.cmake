# cmake -DIN=file -DOUT=file.inc -P embed_file.cmake: writes IN's bytes as a
# C initializer list (16 a line) followed by a terminating 0x00. See
# Embed.cmake.
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REPEAT "0x[0-9a-f][0-9a-f]," 16 line)
string(REGEX REPLACE "(${line})" "\\1\n" bytes "${bytes}")
file(WRITE "${OUT}.tmp" "/* Generated from ${IN}: do not edit. */\n${bytes}0x00\n")
file(RENAME "${OUT}.tmp" "${OUT}")
