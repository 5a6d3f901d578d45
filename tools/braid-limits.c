/*
 * braid-limits: the machine's own limits, against which docs/PERFORMANCE.md reads braid's
 * numbers. STREAM-like copy (a[i] = b[i]) and add (a[i] = b[i] + c[i]) over arrays far
 * larger than the caches, with 1 and with T threads, and the round trip of a ping-pong
 * through one shared cache line between two threads (the floor of any handshake between two
 * ranks on this host).
 *
 *   braid-limits [-s MiB] [-t threads] [-n reps]
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct stream_job {
    float *a, *b, *c;
    size_t n;
    int add, reps;
    pthread_barrier_t *bar;
    double best;
} stream_job_t;

static void *stream_main(void *arg)
{
    stream_job_t *j = arg;
    j->best = 1e30;
    for (int r = 0; r < j->reps; r++) {
        pthread_barrier_wait(j->bar);
        double t0 = now();
        if (j->add)
            for (size_t i = 0; i < j->n; i++)
                j->a[i] = j->b[i] + j->c[i];
        else
            memcpy(j->a, j->b, j->n * sizeof(float));
        pthread_barrier_wait(j->bar);
        double t = now() - t0;
        if (t < j->best)
            j->best = t;
    }
    return NULL;
}

/* Bytes moved per second by `threads` threads, each on its own slice of the arrays. */
static double stream(float *a, float *b, float *c, size_t n, int threads, int add, int reps)
{
    pthread_t th[64];
    stream_job_t jobs[64];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)threads);
    size_t per = n / (size_t)threads;
    for (int t = 0; t < threads; t++) {
        size_t off = (size_t)t * per;
        jobs[t] = (stream_job_t){ a + off, b + off, c + off, per, add, reps, &bar, 0 };
        pthread_create(&th[t], NULL, stream_main, &jobs[t]);
    }
    double worst = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(th[t], NULL);
        if (jobs[t].best > worst)
            worst = jobs[t].best;
    }
    pthread_barrier_destroy(&bar);
    return (double)(per * (size_t)threads) * sizeof(float) * (add ? 3 : 2) / worst;
}

static _Alignas(64) _Atomic long ping_line;

static void *pong_main(void *arg)
{
    long rounds = *(long *)arg;
    for (long i = 0; i < rounds; i++) {
        while (atomic_load_explicit(&ping_line, memory_order_acquire) != 2 * i + 1)
            ;
        atomic_store_explicit(&ping_line, 2 * i + 2, memory_order_release);
    }
    return NULL;
}

/* Round trip of one cache line between two threads, in seconds. */
static double pingpong(long rounds)
{
    pthread_t th;
    atomic_store(&ping_line, 0);
    pthread_create(&th, NULL, pong_main, &rounds);
    double t0 = now();
    for (long i = 0; i < rounds; i++) {
        atomic_store_explicit(&ping_line, 2 * i + 1, memory_order_release);
        while (atomic_load_explicit(&ping_line, memory_order_acquire) != 2 * i + 2)
            ;
    }
    double t = now() - t0;
    pthread_join(th, NULL);
    return t / (double)rounds;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: braid-limits [-s MiB per array] [-t threads] [-n repetitions]\n");
}

int main(int argc, char **argv)
{
    size_t mib = 256;
    int threads = (int)sysconf(_SC_NPROCESSORS_ONLN), reps = 5, opt;
    while ((opt = getopt(argc, argv, "s:t:n:h")) != -1) {
        switch (opt) {
        case 's': mib = strtoul(optarg, NULL, 10); break;
        case 't': threads = atoi(optarg); break;
        case 'n': reps = atoi(optarg); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (mib == 0 || threads < 1 || threads > 64 || reps < 1) {
        usage(stderr);
        return 2;
    }
    size_t n = mib << 18;   /* floats per array */
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float)),
          *c = malloc(n * sizeof(float));
    if (a == NULL || b == NULL || c == NULL) {
        fprintf(stderr, "braid-limits: cannot allocate 3 x %zu MiB\n", mib);
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        a[i] = 0, b[i] = (float)(i & 1023), c[i] = 1;
    printf("# arrays of %zu MiB, best of %d\n", mib, reps);
    for (int t = 1; t <= threads; t += threads > 1 ? threads - 1 : 1) {
        printf("copy  %2d thread(s): %6.2f GB/s\n", t, stream(a, b, c, n, t, 0, reps) / 1e9);
        printf("add   %2d thread(s): %6.2f GB/s\n", t, stream(a, b, c, n, t, 1, reps) / 1e9);
    }
    if (sysconf(_SC_NPROCESSORS_ONLN) > 1)
        printf("cache-line ping-pong round trip: %.3f us\n", pingpong(1000000) * 1e6);
    free(a);
    free(b);
    free(c);
    return 0;
}
