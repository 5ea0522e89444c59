# SPDX-License-Identifier: MIT
# Turn a text file into a C array (NUL-terminated) so a tool can carry it:
#   cmake -DIN=file -DOUT=header.h -DNAME=symbol -P embed.cmake
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)"
  "\\1\n" bytes "${bytes}")
file(WRITE "${OUT}" "/* Generated from ${IN} by cmake/embed.cmake. */\n"
  "static const char ${NAME}[] = {\n${bytes}0x00};\n")
