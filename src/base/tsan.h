/*
 * ThreadSanitizer annotations (configure --enable-tsan; empty in every other build).
 *
 * ThreadSanitizer knows memory by its virtual address. Where one process maps the same
 * shared memory twice (ranks that are threads of one process each map every peer's
 * segment), a release store through one mapping and the acquire load that sees it through
 * the other look unrelated to it, and every access the pair orders (a peer's buffer read
 * in place) looks like a race. Code that synchronises through such memory names one
 * address for both sides (a key: the owner's mapping of the word) and says
 * braid_tsan_release(key) before its release store and braid_tsan_acquire(key) after an
 * acquire load that saw it.
 */
#ifndef BRAID_BASE_TSAN_H
#define BRAID_BASE_TSAN_H

#include <stdatomic.h>
#include <stdint.h>

#if defined(__SANITIZE_THREAD__)
#define BRAID_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define BRAID_TSAN 1
#endif
#endif
#ifndef BRAID_TSAN
#define BRAID_TSAN 0
#endif

#if BRAID_TSAN
void __tsan_acquire(void *addr);   /* the ThreadSanitizer runtime's interface */
void __tsan_release(void *addr);
#endif

/* The thread's accesses so far happen before those after a braid_tsan_acquire(key). */
static inline void braid_tsan_release(const volatile void *key)
{
#if BRAID_TSAN
    if (key != NULL)
        __tsan_release((void *)(uintptr_t)key);
#else
    (void)key;
#endif
}

static inline void braid_tsan_acquire(const volatile void *key)
{
#if BRAID_TSAN
    if (key != NULL)
        __tsan_acquire((void *)(uintptr_t)key);
#else
    (void)key;
#endif
}

/* A sequentially consistent fence. GCC refuses atomic_thread_fence(memory_order_seq_cst)
 * under -fsanitize=thread (-Wtsan: ThreadSanitizer does not model fences); there a seq_cst
 * read-modify-write stands in for it (a full barrier on the hardware too). */
static inline void braid_fence_seq_cst(void)
{
#if BRAID_TSAN
    static _Atomic int word;
    atomic_fetch_add_explicit(&word, 0, memory_order_seq_cst);
#else
    atomic_thread_fence(memory_order_seq_cst);
#endif
}

#endif
