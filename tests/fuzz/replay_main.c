/* The fuzz target without libFuzzer: runs every file of a corpus directory through
 * LLVMFuzzerTestOneInput, then a fixed number of inputs made by a PRNG with a fixed seed (half of
 * them the corpus files with a few bytes changed, half random bytes), so that a test built with
 * any compiler replays the corpus and explores a little around it, the same way on every run.
 *
 *     fuzz_replay <corpus dir> [generated inputs (default 0)] [seed (default 1)]
 *
 * A failing input is written to fuzz-failure.bin in the working directory before it runs, so
 * that a crash leaves it behind; it is removed when everything passes. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct input {
    uint8_t *data;
    size_t size;
} input;

enum { REPLAY_MAX_INPUT = 4096 };

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Reads every regular file of dir, in name order. */
static input *read_corpus(const char *dir, size_t *count) {
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "fuzz_replay: cannot open %s\n", dir);
        exit(2);
    }
    char **names = NULL;
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        names = realloc(names, (n + 1) * sizeof *names);
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    if (n > 0)
        qsort(names, n, sizeof *names, by_name);
    input *in = calloc(n ? n : 1, sizeof *in);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FILE *fp = fopen(path, "rb");
        free(names[i]);
        if (!fp)
            continue;
        uint8_t *buf = malloc(REPLAY_MAX_INPUT);
        size_t got = fread(buf, 1, REPLAY_MAX_INPUT, fp);
        fclose(fp);
        in[kept++] = (input){buf, got};
    }
    free(names);
    *count = kept;
    return in;
}

/* splitmix64: a fixed seed gives the same inputs on every machine. */
static uint64_t next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static void run(const uint8_t *data, size_t size) {
    FILE *fp = fopen("fuzz-failure.bin", "wb");
    if (fp) {
        fwrite(data, 1, size, fp);
        fclose(fp);
    }
    LLVMFuzzerTestOneInput(data, size);
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: fuzz_replay <corpus dir> [generated inputs] [seed]\n");
        return 2;
    }
    long generated = argc > 2 ? strtol(argv[2], NULL, 10) : 0;
    uint64_t seed = argc > 3 ? strtoull(argv[3], NULL, 10) : 1;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    size_t n;
    input *corpus = read_corpus(argv[1], &n);
    for (size_t i = 0; i < n; i++)
        run(corpus[i].data, corpus[i].size);
    uint8_t *buf = malloc(REPLAY_MAX_INPUT);
    for (long g = 0; g < generated; g++) {
        size_t size;
        if (n > 0 && g % 2 == 0) {
            const input *in = &corpus[next(&seed) % n];
            size = in->size;
            memcpy(buf, in->data, size);
            /* A few bytes changed, or the input cut short, or grown by random bytes. */
            uint64_t how = next(&seed);
            if (how % 4 == 0 && size > 1) {
                size = 1 + next(&seed) % (size - 1);
            } else if (how % 4 == 1 && size < REPLAY_MAX_INPUT) {
                size_t more = 1 + next(&seed) % 64;
                for (; more > 0 && size < REPLAY_MAX_INPUT; more--)
                    buf[size++] = (uint8_t)next(&seed);
            }
            for (int k = 1 + (int)(how >> 8) % 4; k > 0 && size > 0; k--)
                buf[next(&seed) % size] = (uint8_t)next(&seed);
        } else {
            size = 1 + next(&seed) % 512;
            for (size_t i = 0; i < size; i++)
                buf[i] = (uint8_t)next(&seed);
        }
        run(buf, size);
    }
    remove("fuzz-failure.bin");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("fuzz_replay: %zu corpus inputs and %ld generated (seed %s) in %.1f s\n", n, generated,
           argc > 3 ? argv[3] : "1", s);
    for (size_t i = 0; i < n; i++)
        free(corpus[i].data);
    free(corpus);
    free(buf);
    return 0;
}
