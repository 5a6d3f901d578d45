/*
 * NCCL_ALGO and NCCL_PROTO: parsing into per-collective masks. See tune.h.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "algorithms/tune.h"
#include "algorithms/usched.h"
#include "base/log.h"

/* What a setting's names mean: a mask per name (0 for a name known to NCCL that braid has
 * nothing for), and which bits apply to each collective. */
typedef struct tune_names {
    const char *setting;                /* "NCCL_ALGO" */
    int (*lookup)(const char *name, size_t len, uint32_t *mask);
    uint32_t (*claims)(int kind);
    void (*known)(char *buf, size_t len);
    uint32_t (*named_only)(void);       /* names that only naming allows (not "^x"), or NULL */
} tune_names_t;

static int name_eq(const char *name, size_t len, const char *want)
{
    return want != NULL && strlen(want) == len && strncasecmp(name, want, len) == 0;
}

/* NCCL's algorithm names that braid has no algorithm for. */
static const char *const nccl_absent[] = { "collnet", "collnetdirect", "collnetchain", "nvls",
                                           "nvlstree", "pat" };

static int algo_lookup(const char *name, size_t len, uint32_t *mask)
{
    int known = 0;
    *mask = 0;
    for (int i = 0; i < braid_nalgos; i++)
        if (name_eq(name, len, braid_algos[i]->name) || name_eq(name, len, braid_algos[i]->nccl)) {
            *mask |= 1u << i;
            known = 1;
        }
    if (name_eq(name, len, "pairwise"))
        return algo_lookup("direct", 6, mask);
    for (size_t i = 0; i < sizeof(nccl_absent) / sizeof(nccl_absent[0]); i++)
        known |= name_eq(name, len, nccl_absent[i]);
    return known;
}

static uint32_t algo_claims(int kind)
{
    uint32_t m = 0;
    for (int i = 0; i < braid_nalgos; i++)
        if (braid_algos[i]->colls & (1u << kind))
            m |= 1u << i;
    return m;
}

/* User schedules (algorithms/usched.c) run only where NCCL_ALGO names them. */
static uint32_t algo_user(void)
{
    uint32_t m = 0;
    for (int i = 0; i < braid_nalgos; i++)
        if (braid_algos[i]->user != NULL)
            m |= 1u << i;
    return m;
}

int braid_tune_algo_known(const char *name)
{
    uint32_t m;
    return algo_lookup(name, strlen(name), &m);
}

static void algo_known(char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < braid_nalgos && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%s", i ? ", " : "", braid_algos[i]->name);
    if (o < len)
        snprintf(buf + o, len - o, ", pairwise (= direct); NCCL's ring, tree, collnetdirect, "
                 "collnetchain, nvls, nvlstree, pat (the last five: no such algorithm here)");
}

static const char *const proto_names[BRAID_NPROTOS] = { "LL", "LL128", "Simple" };

static int proto_lookup(const char *name, size_t len, uint32_t *mask)
{
    for (int i = 0; i < BRAID_NPROTOS; i++)
        if (name_eq(name, len, proto_names[i])) {
            *mask = 1u << i;
            return 1;
        }
    return 0;
}

static uint32_t proto_claims(int kind)
{
    (void)kind;
    return (1u << BRAID_NPROTOS) - 1;
}

static void proto_known(char *buf, size_t len)
{
    snprintf(buf, len, "LL, LL128, Simple");
}

void braid_tune_init(braid_tune_t *t)
{
    memset(t, 0, sizeof(*t));
    t->model = braid_model_default;
    for (int k = 0; k < BRAID_COLL_NUM; k++) {
        t->allow[k] = algo_claims(k) & ~algo_user();
        t->proto[k] = proto_claims(k);
    }
}

static void coll_known(char *buf, size_t len)
{
    size_t o = 0;
    for (int k = 0; k < BRAID_COLL_SEND && o < len; k++)
        o += (size_t)snprintf(buf + o, len - o, "%s%s", k ? ", " : "", braid_coll_name(k));
}

static int coll_lookup(const char *name, size_t len)
{
    for (int k = 0; k < BRAID_COLL_SEND; k++)
        if (name_eq(name, len, braid_coll_name(k)))
            return k;
    return -1;
}

static const char *skip_space(const char *p, const char *end)
{
    while (p < end && isspace((unsigned char)*p))
        p++;
    return p;
}

static size_t trim_len(const char *p, const char *end)
{
    while (end > p && isspace((unsigned char)end[-1]))
        end--;
    return (size_t)(end - p);
}

/* One section "[coll:][^]name,name" of [p, end) into out[]. */
static braid_status_t tune_section(const tune_names_t *tn, const char *spec, const char *p,
                                   const char *end, uint32_t *out)
{
    char known[512];
    int kind = -1;
    const char *section = p;
    const char *colon = memchr(p, ':', (size_t)(end - p));
    if (colon != NULL) {
        const char *c = skip_space(p, colon);
        kind = coll_lookup(c, trim_len(c, colon));
        if (kind < 0) {
            coll_known(known, sizeof(known));
            return braid_err(BRAID_ERR_INVALID, "%s=\"%s\": unknown collective \"%.*s\" "
                             "(known: %s)", tn->setting, spec, (int)trim_len(c, colon), c,
                             known);
        }
        p = colon + 1;
    }
    p = skip_space(p, end);
    int exclude = p < end && *p == '^';
    if (exclude)
        p++;
    uint32_t mask = 0;
    while (p <= end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *e = comma != NULL ? comma : end;
        const char *n = skip_space(p, e);
        size_t len = trim_len(n, e);
        uint32_t m;
        if (len == 0 || !tn->lookup(n, len, &m)) {
            tn->known(known, sizeof(known));
            return braid_err(BRAID_ERR_INVALID, "%s=\"%s\": %s%.*s%s (known: %s)",
                             tn->setting, spec, len ? "unknown name \"" : "an empty name",
                             (int)len, n, len ? "\"" : "", known);
        }
        mask |= m;
        p = e + 1;
    }
    uint32_t allowed = exclude ? ~mask & ~(tn->named_only ? tn->named_only() : 0) : mask;
    for (int k = 0; k < BRAID_COLL_NUM; k++) {
        if ((kind >= 0 && k != kind) || tn->claims(k) == 0)
            continue;
        if (allowed & tn->claims(k))
            out[k] = allowed & tn->claims(k);
        else if (kind >= 0)
            return braid_err(BRAID_ERR_INVALID, "%s=\"%s\" leaves %s nothing braid has",
                             tn->setting, spec, braid_coll_name(k));
        else   /* a section for every collective: one it does not fit keeps its choice */
            BRAID_INFO(BRAID_SUB_TUNING, "%s=\"%s\": \"%.*s\" names nothing %s has: its "
                       "choice is left as it was", tn->setting, spec,
                       (int)trim_len(section, end), section, braid_coll_name(k));
    }
    return BRAID_OK;
}

static braid_status_t tune_parse(const tune_names_t *tn, const char *spec, uint32_t *masks)
{
    uint32_t out[BRAID_COLL_NUM];
    memcpy(out, masks, sizeof(out));
    const char *p = spec, *end = spec + strlen(spec);
    while (p < end) {
        const char *semi = memchr(p, ';', (size_t)(end - p));
        const char *e = semi != NULL ? semi : end;
        if (skip_space(p, e) < e)
            BRAID_CHECK(tune_section(tn, spec, p, e, out));
        p = e + 1;
    }
    memcpy(masks, out, sizeof(out));
    return BRAID_OK;
}

braid_status_t braid_tune_algo(braid_tune_t *t, const char *spec)
{
    static const tune_names_t names = { "NCCL_ALGO", algo_lookup, algo_claims, algo_known,
                                        algo_user };
    if (spec == NULL || *spec == '\0')
        return BRAID_OK;
    BRAID_CHECK(tune_parse(&names, spec, t->allow));
    snprintf(t->algo_spec, sizeof(t->algo_spec), "%s", spec);
    return BRAID_OK;
}

braid_status_t braid_tune_proto(braid_tune_t *t, const char *spec)
{
    static const tune_names_t names = { "NCCL_PROTO", proto_lookup, proto_claims, proto_known,
                                        NULL };
    if (spec == NULL || *spec == '\0')
        return BRAID_OK;
    return tune_parse(&names, spec, t->proto);
}

uint64_t braid_tune_hash(const braid_tune_t *t)
{
    uint64_t h = 1469598103934665603ull;    /* FNV-1a over the masks and the plugin */
    for (int k = 0; k < BRAID_COLL_NUM; k++) {
        uint64_t v[4] = { t->allow[k], t->proto[k], (uint64_t)t->calibrate, t->slice };
        const unsigned char *p = (const unsigned char *)v;
        for (size_t i = 0; i < sizeof(v); i++)
            h = (h ^ p[i]) * 1099511628211ull;
    }
    for (const char *c = t->plugin_spec; *c != '\0'; c++)
        h = (h ^ (unsigned char)*c) * 1099511628211ull;
    for (int i = 0; i < braid_nalgos; i++) {     /* the schedules behind the masks' bits */
        uint64_t u = braid_usched_hash(braid_algos[i]);
        for (int b = 0; u != 0 && b < 8; b++)
            h = (h ^ ((u >> (8 * b)) & 0xff)) * 1099511628211ull;
    }
    return h;
}
