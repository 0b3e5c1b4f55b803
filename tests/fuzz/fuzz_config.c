/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_config.c - libFuzzer target for the tierd.conf parser (tierd_config_load_string): any
 * input must either parse or give a "NAME:LINE: ..." message, without crashing or leaking.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/tierd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 64 * 1024)
        return 0;
    struct tierd_config cfg;
    char err[1024];
    err[0] = '\0';
    int rc =
        tierd_config_load_string("fuzz.conf", (const char *)data, size, &cfg, err, sizeof(err));
    if (rc != 0 && strncmp(err, "fuzz.conf", 9) != 0)
        abort(); /* every error names the file */
    tierd_config_fini(&cfg);
    return 0;
}
