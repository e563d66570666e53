# SPDX-License-Identifier: Apache-2.0
# test_lua_scripts_gen.cmake - the generator of the script table (cmake/lua_scripts.cmake) on scripts
# this test writes: the headers it parses (libraries standing for their lists, nested, variadic last
# arguments, flags, reply facts), the constants, numbers, offsets, named arguments and fact codes it
# emits for C and for Lua,
# the function libraries it assembles, and each mistake it must fail the build on, with its message.
#   cmake -DGENERATOR=cmake/lua_scripts.cmake -DWORK=<scratch dir> -P tests/unit/test_lua_scripts_gen.cmake
cmake_minimum_required(VERSION 3.18)

set(failures 0)
macro(fail what)
  message("FAIL: ${what}")
  math(EXPR failures "${failures} + 1")
endmacro()

set(keys_h [=[
#ifndef T_KEYS_H
#define T_KEYS_H
#define T_PREFIX "t:" /* a comment; with a semicolon */
#define T_ONE    T_PREFIX "one"
#define T_CHAN   T_PREFIX "ch" "an"
#endif
]=])
set(limits_h [=[
#define T_LIMITS_H
#define T_GRACE  60000 /* ms */
#define T_UNUSED 7
]=])
set(lib_base [=[
-- lib_base.lua: a library with lists of its own, keys read by literal index, arguments by name.
-- KEYS: a b
-- ARGV: x y
-- REPLY: fence
-- REPLY: grant

local function base() return KEYS[2], A_y end
]=])
set(lib_top [=[
-- lib_top.lua: a library whose KEYS take another's.
-- KEYS: c lib_base.lua

local function top() return T_ONE, KEYS[KEYS_AT_LIB_BASE], T_GRACE end
]=])
set(one [=[
-- uses: lib_base.lua
-- one.lua: a script extending a library's lists.
-- KEYS: lib_base.lua d
-- ARGV: lib_base.lua z
-- ARGV: rest...
-- (T_ONE and A_x in a comment are no use.)
return KEYS[3] .. T_CHAN .. A_z .. A_rest[A_rest_at] .. R_GRANT
]=])
set(two [=[
-- uses: lib_top.lua
-- KEYS: lib_top.lua
-- ARGV: all...
-- flags: no-writes allow-oom
-- own-connection: its answer may be large
return top(), #A_all
]=])

# Writes the files of a case (pairs of name and variable) into WORK/<name> and runs the generator;
# sets rc and out (its messages on one line) in the caller's scope.
function(generate case)
  set(dir ${WORK}/${case})
  file(REMOVE_RECURSE ${dir})
  file(MAKE_DIRECTORY ${dir}/lua)
  file(WRITE ${dir}/keys.h "${keys_h}")
  file(WRITE ${dir}/limits.h "${limits_h}")
  set(files ${ARGN})
  while(files)
    list(POP_FRONT files name var)
    if(name STREQUAL "keys.h" OR name STREQUAL "limits.h")
      file(WRITE ${dir}/${name} "${${var}}")
    else()
      file(WRITE ${dir}/lua/${name} "${${var}}")
    endif()
  endwhile()
  execute_process(COMMAND ${CMAKE_COMMAND} -DLUA_DIR=${dir}/lua -DKEYS_H=${dir}/keys.h
                          -DLIMITS_H=${dir}/limits.h -DOUT_DIR=${dir}/out -P ${GENERATOR}
                  RESULT_VARIABLE result ERROR_VARIABLE err OUTPUT_VARIABLE stdout)
  string(REGEX REPLACE "[ \n]+" " " err "${stdout}${err}")
  set(rc ${result} PARENT_SCOPE)
  set(out "${err}" PARENT_SCOPE)
endfunction()

# --- what the generator emits for well-formed scripts ------------------------------------------------------
generate(good lib_base.lua lib_base lib_top.lua lib_top one.lua one two.lua two)
if(NOT rc EQUAL 0)
  fail("well-formed scripts generate (${out})")
endif()
file(READ ${WORK}/good/out/lua_scripts.h h)
foreach(line
    "    SCRIPT_ONE,\n    SCRIPT_TWO,\n};\n#define SCRIPT_COUNT 2\n"
    "#define LIB_BASE_NKEYS 2\n#define LIB_BASE_KEY_A 0\n#define LIB_BASE_KEY_B 1\n"
    "#define LIB_BASE_ARGV_Y 1\n#define LIB_BASE_REPLY_FENCE 0\n#define LIB_BASE_REPLY_GRANT 1\n#define LIB_BASE_NREPLY 2\n"
    "#define LIB_TOP_NKEYS 3\n#define LIB_TOP_KEY_C 0\n#define LIB_TOP_KEY_A 1\n#define LIB_TOP_KEY_B 2\n#define LIB_TOP_KEY_LIB_BASE 1\n"
    "#define ONE_NKEYS 3\n#define ONE_KEY_A 0\n#define ONE_KEY_B 1\n#define ONE_KEY_D 2\n#define ONE_KEY_LIB_BASE 0\n"
    "#define ONE_NARGV 3\n#define ONE_ARGV_X 0\n#define ONE_ARGV_Y 1\n#define ONE_ARGV_Z 2\n#define ONE_ARGV_REST 3\n"
    "#define TWO_NKEYS 3\n#define TWO_KEY_C 0\n#define TWO_KEY_A 1\n#define TWO_KEY_B 2\n#define TWO_KEY_LIB_TOP 0\n#define TWO_KEY_LIB_BASE 1\n#define TWO_NARGV 0\n#define TWO_ARGV_ALL 0\n")
  string(FIND "${h}" "${line}" at)
  if(at EQUAL -1)
    fail("lua_scripts.h holds: ${line}")
  endif()
endforeach()
file(READ ${WORK}/good/out/lua_scripts.c c)
string(FIND "${c}" "ONE_NKEYS, ONE_NARGV, true, false}" at)
if(at EQUAL -1)
  fail("one.lua takes the rest of ARGV and shares the pipelined connection")
endif()
string(FIND "${c}" "TWO_NKEYS, TWO_NARGV, true, true}" at)
if(at EQUAL -1)
  fail("two.lua takes all of ARGV and goes on its thread's own connection")
endif()
# Reads the function library of a script into text, its name (fg_<script>_<12 hex digits>) into fn.
macro(library stem)
  file(READ ${WORK}/good/out/lua/${stem}.lua text)
  string(REGEX MATCH "^#!lua name=fg_${stem}_[0-9a-f]+\n" first "${text}")
  string(REGEX REPLACE "^#!lua name=|\n$" "" fn "${first}")
  string(REGEX REPLACE "^fg_${stem}_" "" digits "${fn}")
  if(NOT digits MATCHES "^[0-9a-f]+$" OR NOT digits MATCHES "^............$")
    fail("${stem}.lua is the library fg_${stem}_<12 hex digits> (${first})")
  endif()
endmacro()
library(one)
string(FIND "${c}" "{\"one.lua\", \"${fn}\"," at)
if(at EQUAL -1)
  fail("lua_scripts.c calls one.lua by its function's name")
endif()
if(NOT text STREQUAL "#!lua name=${fn}\nlocal KEYS, ARGV\nlocal A_y\nlocal A_z\nlocal A_rest\n\
local A_rest_at = 4\nlocal T_CHAN = 't:chan'\nlocal R_GRANT = ' 1 '\n${lib_base}\nredis.register_function{function_name = '${fn}', flags = {},\n\
callback = function(keys, argv)\nKEYS, ARGV = keys, argv\nA_y = ARGV[2]\nA_z = ARGV[3]\n\
A_rest = ARGV\n${one}\nend}\n")
  fail("one.lua loads as the arguments it and its library name (ARGV for the rest, and where the rest \
starts), its constants, the code of the reply fact it names, its library, and itself as the function \
that sets them")
endif()
library(two)
if(NOT text STREQUAL "#!lua name=${fn}\nlocal KEYS, ARGV\nlocal A_all\nlocal T_ONE = 't:one'\n\
local T_GRACE = 60000\nlocal KEYS_AT_LIB_BASE = 2\n${lib_top}\n\
redis.register_function{function_name = '${fn}', flags = {'no-writes', 'allow-oom'},\n\
callback = function(keys, argv)\nKEYS, ARGV = keys, argv\nA_all = ARGV\n${two}\nend}\n")
  fail("two.lua loads with the constant, the number and the list offset its library uses, ARGV as \
its rest, and its flags")
endif()

# --- mistakes that fail the build ----------------------------------------------------------------------------
set(past_count "-- KEYS: a b\n-- ARGV:\nreturn KEYS[3]\n")
set(unknown_lib "-- uses: lib_nope.lua\n-- KEYS:\n-- ARGV:\nreturn 1\n")
set(no_argv "-- KEYS: a\nreturn KEYS[1]\n")
set(twice "-- KEYS: a b a\n-- ARGV:\nreturn 1\n")
set(moved "-- uses: lib_base.lua\n-- KEYS: d lib_base.lua\n-- ARGV: lib_base.lua\nreturn base()\n")
set(rest_first "-- KEYS:\n-- ARGV: rest... z\nreturn 1\n")
set(undeclared_list "-- KEYS: lib_plain.lua\n-- ARGV:\nreturn 1\n")
set(no_offset "-- KEYS: a\n-- ARGV:\nreturn KEYS_AT_LIB_BASE\n")
set(positional "-- KEYS:\n-- ARGV: x\nreturn ARGV[1]\n")
set(counted "-- KEYS:\n-- ARGV: ids...\nreturn #ARGV\n")
set(via_library "-- uses: lib_plain.lua\n-- KEYS:\n-- ARGV: x\nreturn plain()\n")
set(lib_plain "-- lib_plain.lua: declares nothing\n\nlocal function plain() return ARGV[1] end\n")
set(undeclared_arg "-- KEYS:\n-- ARGV: x\nreturn A_x .. A_y\n")
set(bad_flag "-- KEYS:\n-- ARGV:\n-- flags: no-writes fast\nreturn 1\n")
set(bad_name "-- KEYS: Upper\n-- ARGV:\nreturn 1\n")
set(number_key "#define T_N 3\n")
set(late_name "#define T_A T_B \"x\"\n#define T_B \"y\"\n")
set(both_names "#define T_GRACE \"g\"\n")
set(undeclared_fact "-- KEYS:\n-- ARGV:\nreturn {'x', R_FENCE, 1, R_NOPE, 2}\n")
set(script_facts "-- KEYS:\n-- ARGV:\n-- REPLY: more\nreturn 1\n")
set(lib_more "-- lib_more.lua: a second library of facts\n-- REPLY: more\n")
set(lib_a_twice "-- lib_a_twice.lua: one fact twice\n-- REPLY: fence\n-- REPLY: fence\n")
foreach(case
    "past_count|reads KEYS\\[3\\] but declares 2 KEYS"
    "unknown_lib|uses lib_nope.lua, which is not a library"
    "no_argv|declares no \"-- KEYS:\" or no \"-- ARGV:\" line"
    "twice|KEYS names a twice"
    "moved|lib_base.lua reads KEYS\\[2\\], so its KEYS must start with lib_base.lua"
    "rest_first|only the last ARGV name may end in"
    "undeclared_list|KEYS names lib_plain.lua, which declares no KEYS"
    "no_offset|reads KEYS_AT_LIB_BASE, but its KEYS do not take that library's list"
    "positional|positional.lua reads ARGV by position: name each argument A_<name>"
    "counted|counted.lua reads ARGV by position"
    "via_library|via_library.lua reads ARGV by position"
    "undeclared_arg|reads A_y, but its ARGV declares no such name"
    "bad_flag|\"fast\" is not a flag of a Redis function"
    "bad_name|\"Upper\" in KEYS is neither"
    "number_key|T_N is not a sequence of plain string literals"
    "late_name|T_A uses T_B, which is not defined above it"
    "both_names|T_GRACE is a name of .*keys.h too"
    "undeclared_fact|names reply fact R_NOPE, which no REPLY line declares"
    "script_facts|script_facts.lua: REPLY facts are declared by one library only"
    "lib_more|lib_more.lua: REPLY facts are declared by one library only"
    "lib_a_twice|REPLY fact \"fence\" is no lower-case name, or named twice")
  string(REGEX REPLACE "\\|.*$" "" name "${case}")
  string(REGEX REPLACE "^[^|]*\\|" "" want "${case}")
  if(name MATCHES "^(number_key|late_name|both_names)$")
    generate(${name} keys.h ${name} lib_base.lua lib_base one.lua one)
  elseif(name MATCHES "^lib_")
    generate(${name} lib_base.lua lib_base ${name}.lua ${name})
  else()
    generate(${name} lib_base.lua lib_base lib_plain.lua lib_plain ${name}.lua ${name})
  endif()
  if(rc EQUAL 0)
    fail("${name}: the generator fails")
  elseif(NOT out MATCHES "${want}")
    fail("${name}: says '${want}' (said: ${out})")
  endif()
endforeach()

if(failures GREATER 0)
  message(FATAL_ERROR "${failures} checks failed")
endif()
message("all checks passed")
