/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_lua_scripts.c - the script table that cmake/lua_scripts.cmake generates
 * from the headers of lua/: one entry per enum fg_script, named after its
 * file, with the counts of its index constants; each source as Redis loads it
 * (a function library named after the script and its text: key names, then
 * libraries, then the script as the function); and no key name spelled in Lua
 * except the constants taken from store/backend/redis_keys.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "embedded.h"
#include "store/backend/redis_keys.h"

static void every_script_named_and_counted(void **state)
{
    (void)state;
    for (size_t s = 0; s < SCRIPT_COUNT; s++) {
        const struct lua_script *script = &lua_scripts[s];
        assert_non_null(script->name);
        assert_non_null(script->source);
        size_t len = strlen(script->name);
        assert_true(len > 4 && strcmp(script->name + len - 4, ".lua") == 0);
        assert_true(strncmp(script->name, "lib_", 4) != 0);
        assert_true(script->nkeys + script->nargv <= 40);
    }
    assert_string_equal(lua_scripts[SCRIPT_FENCE_CHECK].name, "fence_check.lua");
    assert_string_equal(lua_scripts[SCRIPT_LOCK_ACQUIRE].name, "lock_acquire.lua");
    assert_string_equal(lua_scripts[SCRIPT_SEM_WATCH].name, "sem_watch.lua");
}

static void counts_match_the_index_constants(void **state)
{
    (void)state;
    assert_int_equal(lua_scripts[SCRIPT_LOCK_ACQUIRE].nkeys, LOCK_ACQUIRE_NKEYS);
    assert_int_equal(lua_scripts[SCRIPT_LOCK_ACQUIRE].nargv, LOCK_ACQUIRE_NARGV);
    assert_int_equal(LOCK_ACQUIRE_NARGV, LOCK_ACQUIRE_ARGV_QUEUE_KEEP_MS + 1);
    assert_int_equal(LOCK_ACQUIRE_NKEYS, 4 + LIB_LEASE_NKEYS + 1); /* and rid_moved */
    assert_int_equal(LOCK_ACQUIRE_KEY_FENCE, LIB_LOCK_KEY_LIB_LEASE + LIB_LEASE_KEY_FENCE);
    assert_int_equal(SEM_ACQUIRE_NKEYS, 6 + LIB_LEASE_NKEYS + 1);
    /* the lock's arguments but its queue's two (keep_alive times a semaphore's), and limit */
    assert_int_equal(SEM_ACQUIRE_NARGV, LOCK_ACQUIRE_NARGV - 2 + 1);
    assert_int_equal(RW_PATCH_NARGV, LIB_RW_NARGV + 2);
    assert_int_equal(RW_PATCH_ARGV_FIELDS, LIB_RW_NARGV + 2);
    assert_int_equal(lua_scripts[SCRIPT_FENCE_READ].nargv, 0);
    assert_int_equal(lua_scripts[SCRIPT_SEM_STATUS].nkeys, 4);
}

static void only_the_large_read_goes_on_its_own_connection(void **state)
{
    (void)state;
    for (size_t s = 0; s < SCRIPT_COUNT; s++)
        assert_int_equal(lua_scripts[s].own_connection, s == SCRIPT_RW_GET_LARGE);
}

static void only_the_audit_ack_and_patch_take_the_rest(void **state)
{
    (void)state;
    for (size_t s = 0; s < SCRIPT_COUNT; s++)
        assert_int_equal(lua_scripts[s].variadic, s == SCRIPT_RW_AUDIT_ACK || s == SCRIPT_RW_PATCH);
    assert_int_equal(RW_AUDIT_ACK_NARGV, 0);
    assert_int_equal(RW_AUDIT_ACK_ARGV_IDS, 0);
}

static void sources_carry_names_then_libraries(void **state)
{
    (void)state;
    const char *src = lua_scripts[SCRIPT_LOCK_ACQUIRE].source;
    const char *channel = strstr(src, "local CHANNEL_BELL_PREFIX = '" CHANNEL_BELL_PREFIX "'\n");
    const char *lease_lib = strstr(src, "-- lib_lease.lua:");
    const char *lock_lib = strstr(src, "-- lib_lock.lua:");
    const char *own = strstr(src, "-- lock_acquire.lua:");
    assert_non_null(channel);
    assert_non_null(lease_lib);
    assert_non_null(lock_lib);
    assert_non_null(own);
    assert_true(channel < lease_lib && lease_lib < lock_lib && lock_lib < own);
    const char *list = lua_scripts[SCRIPT_LEASE_LIST].source;
    assert_non_null(strstr(list, "local KEY_LOCK_PREFIX = '" KEY_LOCK_PREFIX "'\n"));
    assert_non_null(strstr(list, "local KEY_TAG_END = '" KEY_TAG_END "'\n"));
    assert_null(strstr(lua_scripts[SCRIPT_FENCE_CHECK].source, "local KEY_"));
}

/* Each source is the library "fg_<script>_<12 hex digits>" registering the one
 * function of that name, with the flags its header asks for. */
static void each_script_is_a_function_library(void **state)
{
    (void)state;
    for (size_t s = 0; s < SCRIPT_COUNT; s++) {
        const struct lua_script *script = &lua_scripts[s];
        char stem[64], head[128], registers[128];
        size_t len = strlen(script->name) - 4;
        snprintf(stem, sizeof stem, "fg_%.*s_", (int)len, script->name);
        assert_int_equal(strncmp(script->function, stem, strlen(stem)), 0);
        const char *digits = script->function + strlen(stem);
        assert_int_equal(strlen(digits), 12);
        assert_int_equal(strspn(digits, "0123456789abcdef"), 12);
        snprintf(head, sizeof head, "#!lua name=%s\n", script->function);
        assert_int_equal(strncmp(script->source, head, strlen(head)), 0);
        snprintf(registers, sizeof registers, "function_name = '%s'", script->function);
        assert_non_null(strstr(script->source, registers));
    }
    assert_non_null(strstr(lua_scripts[SCRIPT_LOCK_STATUS].source, "flags = {'no-writes'}"));
    assert_non_null(strstr(lua_scripts[SCRIPT_LOCK_ACQUIRE].source, "flags = {}"));
}

/* A line holding KEY_PREFIX must be one of the constants put before the script. */
static void no_key_name_spelled_in_lua(void **state)
{
    (void)state;
    for (size_t s = 0; s < SCRIPT_COUNT; s++) {
        const char *src = lua_scripts[s].source;
        for (const char *at = strstr(src, KEY_PREFIX); at != NULL;
             at = strstr(at + 1, KEY_PREFIX)) {
            const char *line = at;
            while (line > src && line[-1] != '\n')
                line--;
            if (strncmp(line, "local ", 6) != 0 || strstr(line, " = '") > at)
                fail_msg("%s spells a key name: %.40s", lua_scripts[s].name, line);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_script_named_and_counted),
        cmocka_unit_test(counts_match_the_index_constants),
        cmocka_unit_test(only_the_large_read_goes_on_its_own_connection),
        cmocka_unit_test(only_the_audit_ack_and_patch_take_the_rest),
        cmocka_unit_test(sources_carry_names_then_libraries),
        cmocka_unit_test(each_script_is_a_function_library),
        cmocka_unit_test(no_key_name_spelled_in_lua),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
