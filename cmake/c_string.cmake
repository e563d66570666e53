# SPDX-License-Identifier: Apache-2.0
# c_string_literal(<var> <file>): sets <var> to the bytes of <file> as the body of a C string literal,
# every byte written \xNN and 40 bytes to a line (used by embed.cmake and lua_scripts.cmake).
function(c_string_literal var file)
  file(READ ${file} hex HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "\\\\x\\1" escaped "${hex}")
  string(REGEX REPLACE "((\\\\x..){40})" "\\1\"\n  \"" escaped "${escaped}")
  set(${var} "${escaped}" PARENT_SCOPE)
endfunction()
