/*
 * ncclConfig_t reading: defaults, inheritance, older and newer struct sizes, bad magic and
 * bad values.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "api/config.h"

static void test_null_gives_defaults(void **state)
{
    braid_comm_config_t out;
    (void)state;
    assert_int_equal(braid_config_read(NULL, NULL, &out), BRAID_OK);
    assert_int_equal(out.blocking, 1);
    assert_string_equal(out.comm_name, "");
}

static void test_initializer_and_fields(void **state)
{
    ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
    braid_comm_config_t out;
    (void)state;
    c.blocking = 0;
    c.commName = "trainer";
    c.netName = "Socket";
    assert_int_equal(braid_config_read(&c, NULL, &out), BRAID_OK);
    assert_int_equal(out.blocking, 0);
    assert_string_equal(out.comm_name, "trainer");
    assert_string_equal(out.net_name, "Socket");
}

static void test_inherit(void **state)
{
    braid_comm_config_t parent = { .blocking = 0, .comm_name = "parent" }, out;
    ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
    (void)state;
    assert_int_equal(braid_config_read(NULL, &parent, &out), BRAID_OK);
    assert_int_equal(out.blocking, 0);
    assert_string_equal(out.comm_name, "parent");
    c.commName = "child";   /* blocking left UNDEF: inherited */
    assert_int_equal(braid_config_read(&c, &parent, &out), BRAID_OK);
    assert_int_equal(out.blocking, 0);
    assert_string_equal(out.comm_name, "child");
}

/* An older caller's struct ends before commName: the bytes after `size` are never read. */
static void test_older_size(void **state)
{
    unsigned char buf[sizeof(ncclConfig_t)];
    ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
    braid_comm_config_t out;
    (void)state;
    c.blocking = 0;
    c.size = offsetof(ncclConfig_t, splitShare);
    memset(buf, 0xA5, sizeof(buf));           /* garbage where the old struct ends */
    memcpy(buf, &c, c.size);
    assert_int_equal(braid_config_read((ncclConfig_t *)buf, NULL, &out), BRAID_OK);
    assert_int_equal(out.blocking, 0);
    assert_string_equal(out.comm_name, "");   /* not read from the garbage */
}

/* A newer caller's struct is larger: the fields we know are read, the rest ignored. */
static void test_newer_size(void **state)
{
    struct {
        ncclConfig_t base;
        int future_a, future_b;
    } big;
    braid_comm_config_t out;
    (void)state;
    ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
    big.base = c;
    big.base.size = sizeof(big);
    big.base.blocking = 0;
    big.future_a = 12345;
    big.future_b = -7;
    assert_int_equal(braid_config_read(&big.base, NULL, &out), BRAID_OK);
    assert_int_equal(out.blocking, 0);
}

static void test_bad_magic(void **state)
{
    ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
    braid_comm_config_t out = { .blocking = 7 };
    (void)state;
    c.magic = 0;
    assert_int_equal(braid_config_read(&c, NULL, &out), BRAID_ERR_INVALID);
    assert_int_equal(out.blocking, 7);   /* untouched */
    assert_non_null(strstr(braid_err_last(), "NCCL_CONFIG_INITIALIZER"));
}

static void test_bad_values(void **state)
{
    braid_comm_config_t out;
    (void)state;
    ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
    c.blocking = 2;
    assert_int_equal(braid_config_read(&c, NULL, &out), BRAID_ERR_INVALID);
    assert_non_null(strstr(braid_err_last(), "blocking is 2"));
    c = (ncclConfig_t)NCCL_CONFIG_INITIALIZER;
    c.minCTAs = 8;
    c.maxCTAs = 4;
    assert_int_equal(braid_config_read(&c, NULL, &out), BRAID_ERR_INVALID);
    c = (ncclConfig_t)NCCL_CONFIG_INITIALIZER;
    c.size = 4;
    assert_int_equal(braid_config_read(&c, NULL, &out), BRAID_ERR_INVALID);
    c = (ncclConfig_t)NCCL_CONFIG_INITIALIZER;
    c.splitShare = -3;
    assert_int_equal(braid_config_read(&c, NULL, &out), BRAID_ERR_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_null_gives_defaults), cmocka_unit_test(test_initializer_and_fields),
        cmocka_unit_test(test_inherit),             cmocka_unit_test(test_older_size),
        cmocka_unit_test(test_newer_size),          cmocka_unit_test(test_bad_magic),
        cmocka_unit_test(test_bad_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
