/* SPDX-License-Identifier: Apache-2.0 */
/*
 * replay_main.c - runs a libFuzzer target over every file of a corpus directory, so each fuzz
 * target doubles as a regression test in CTest (built with gcc and the sanitizers, no libFuzzer).
 * The inputs run in the order of their names (C locale), so that a target whose state carries
 * over from input to input (fuzz_api's daemon) replays the same sequence everywhere.
 * Exit 0 when every input ran; any crash or sanitizer report fails the test.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 2;
    }
    struct dirent **names = NULL;
    int nnames = scandir(argv[1], &names, NULL, alphasort);
    if (nnames < 0) {
        perror(argv[1]);
        return 1;
    }
    int n = 0;
    for (int i = 0; i < nnames; i++) {
        const char *name = names[i]->d_name;
        if (name[0] == '.')
            continue;
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", argv[1], name);
        FILE *f = fopen(path, "rb");
        if (!f)
            continue;
        fseek(f, 0, SEEK_END);
        long sz = ftell(f);
        fseek(f, 0, SEEK_SET);
        uint8_t *buf = malloc(sz > 0 ? (size_t)sz : 1);
        size_t got = fread(buf, 1, (size_t)(sz > 0 ? sz : 0), f);
        fclose(f);
        LLVMFuzzerTestOneInput(buf, got);
        free(buf);
        n++;
    }
    for (int i = 0; i < nnames; i++)
        free(names[i]);
    free(names);
    printf("replayed %d inputs from %s\n", n, argv[1]);
    return n > 0 ? 0 : 1;
}
