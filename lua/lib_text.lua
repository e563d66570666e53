-- SPDX-License-Identifier: Apache-2.0
-- lib_text.lua: checks on the bytes of Redis values that must travel as JSON
-- text (prepended to every script whose first line is "-- uses: lib_text.lua").

-- True if s is UTF-8 without NUL (shape of the sequences only; Postgres checks
-- the rest, and a refusal there dead-letters the entry too).
local function utf8_text(s)
  if s:find('%z') then return false end
  local i, n = 1, #s
  while i <= n do
    local c = s:byte(i)
    local len = 0
    if c < 0x80 then len = 1
    elseif c >= 0xC2 and c <= 0xDF then len = 2
    elseif c >= 0xE0 and c <= 0xEF then len = 3
    elseif c >= 0xF0 and c <= 0xF4 then len = 4 end
    if len == 0 or i + len - 1 > n then return false end
    for j = i + 1, i + len - 1 do
      local b = s:byte(j)
      if b < 0x80 or b > 0xBF then return false end
    end
    i = i + len
  end
  return true
end

-- s with every byte that could not travel as JSON text written as \xNN.
local function text_escaped(s)
  if utf8_text(s) then return s end
  return (s:gsub('[%z\1-\31\127-\255]', function(c) return string.format('\\x%02x', c:byte()) end))
end
