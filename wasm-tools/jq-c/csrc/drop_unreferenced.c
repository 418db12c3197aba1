/* jq's block_drop_unreferenced, computed from one walk of the program; included into jq's
   compile.c in place of jq's own (build.rs, OWN), whose text stays there as
   wasmsand_original_drop_unreferenced for the host's equivalence test.

   jq scans the definitions before TOP in order, pass after pass until a pass drops none, and
   drops a definition when nothing else still in the program refers to it. It counted each
   definition's references by walking the whole program, for every definition in every pass:
   with the ~400 builtins bound into every program, 3 ms of each run. Here the references
   between definitions are counted once and the passes are replayed on the counts, so the same
   definitions are kept, in the same order. */

#include <stdint.h>

/* Set (by the host's test only) to run jq's own version instead. */
int wasmsand_original_drop;
/* Set when the builtins of the program being compiled came from the memory the sandbox
   prepared (builtin.c), for that one program: the ones it does not use are left where they
   are instead of freed. The run's memory is thrown
   away at its end; freeing them only wrote to every page they are on, which the next run
   then gets back from the prepared image. */
int wasmsand_keep_dropped;
block wasmsand_original_drop_unreferenced(block body);

typedef struct {
  const inst *def;
  int index;
} wasmsand_def;

static int wasmsand_def_cmp(const void *a, const void *b) {
  uintptr_t x = (uintptr_t)((const wasmsand_def *)a)->def;
  uintptr_t y = (uintptr_t)((const wasmsand_def *)b)->def;
  return x < y ? -1 : x > y;
}

/* The index of the definition `p` among the candidates, or -1. */
static int wasmsand_def_find(const wasmsand_def *defs, int n, const inst *p) {
  int lo = 0, hi = n;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if ((uintptr_t)defs[mid].def < (uintptr_t)p)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < n && defs[lo].def == p ? defs[lo].index : -1;
}

typedef struct {
  int *from, *to;
  int len, cap;
} wasmsand_refs;

/* Records each reference in the instructions from `i` on (closures and argument lists
   included) to a candidate other than `from` itself: jq never counted a definition's
   references to itself. */
static void wasmsand_collect(inst *i, int from, const wasmsand_def *defs, int n, wasmsand_refs *r) {
  for (; i; i = i->next) {
    if (i->bound_by) {
      int t = wasmsand_def_find(defs, n, i->bound_by);
      if (t >= 0 && t != from) {
        if (r->len == r->cap) {
          r->cap = r->cap ? 2 * r->cap : 1024;
          r->from = jv_mem_realloc(r->from, r->cap * sizeof(int));
          r->to = jv_mem_realloc(r->to, r->cap * sizeof(int));
        }
        r->from[r->len] = from;
        r->to[r->len] = t;
        r->len++;
      }
    }
    wasmsand_collect(i->subfn.first, from, defs, n, r);
    wasmsand_collect(i->arglist.first, from, defs, n, r);
  }
}

block block_drop_unreferenced(block body) {
  if (wasmsand_original_drop)
    return wasmsand_original_drop_unreferenced(body);
  int n = 0;
  for (inst *i = body.first; i && i->op != TOP; i = i->next)
    n++;
  if (n == 0)
    return body;
  inst **cand = jv_mem_alloc(n * sizeof(inst *));
  wasmsand_def *defs = jv_mem_alloc(n * sizeof(wasmsand_def));
  for (int k = 0; k < n; k++) {
    cand[k] = block_take(&body);
    defs[k].def = cand[k];
    defs[k].index = k;
  }
  qsort(defs, n, sizeof(wasmsand_def), wasmsand_def_cmp);
  wasmsand_refs r = {0};
  for (int k = 0; k < n; k++)
    wasmsand_collect(cand[k], k, defs, n, &r); /* taken out: its `next` is NULL */
  /* TOP and what follows it refer from outside every candidate, for good. */
  wasmsand_collect(body.first, -1, defs, n, &r);

  /* in[k]: references to k from what is still in the program. The references each candidate
     makes, grouped by candidate: targets[start[k] .. start[k + 1]). */
  int *in = jv_mem_alloc(n * sizeof(int));
  int *start = jv_mem_alloc((n + 1) * sizeof(int));
  int *fill = jv_mem_alloc((n + 1) * sizeof(int));
  int *targets = jv_mem_alloc((r.len ? r.len : 1) * sizeof(int));
  char *alive = jv_mem_alloc(n);
  memset(in, 0, n * sizeof(int));
  memset(start, 0, (n + 1) * sizeof(int));
  memset(alive, 1, n);
  for (int e = 0; e < r.len; e++) {
    in[r.to[e]]++;
    if (r.from[e] >= 0)
      start[r.from[e] + 1]++;
  }
  for (int k = 0; k < n; k++)
    start[k + 1] += start[k];
  memcpy(fill, start, (n + 1) * sizeof(int));
  for (int e = 0; e < r.len; e++)
    if (r.from[e] >= 0)
      targets[fill[r.from[e]]++] = r.to[e];

  /* jq's passes: a candidate dropped early in a pass no longer counts for those after it,
     and one it referred to before it is looked at again in the next pass. */
  int drop;
  do {
    drop = 0;
    for (int k = 0; k < n; k++) {
      if (alive[k] && in[k] == 0) {
        alive[k] = 0;
        drop++;
        for (int e = start[k]; e < start[k + 1]; e++)
          in[targets[e]]--;
      }
    }
  } while (drop != 0);

  block refd = gen_noop();
  block unrefd = gen_noop();
  for (int k = 0; k < n; k++) {
    if (alive[k])
      refd = BLOCK(refd, inst_block(cand[k]));
    else
      unrefd = BLOCK(unrefd, inst_block(cand[k]));
  }
  if (wasmsand_keep_dropped)
    wasmsand_keep_dropped = 0;
  else
    block_free(unrefd);
  jv_mem_free(cand);
  jv_mem_free(defs);
  jv_mem_free(r.from);
  jv_mem_free(r.to);
  jv_mem_free(in);
  jv_mem_free(start);
  jv_mem_free(fill);
  jv_mem_free(targets);
  jv_mem_free(alive);
  return BLOCK(refd, body);
}

/* For the host's test: the names of the definitions before TOP, one per line. */
void wasmsand_write_definitions(block b, FILE *out) {
  for (inst *i = b.first; i && i->op != TOP; i = i->next)
    fprintf(out, "%s/%d\n", i->symbol ? i->symbol : "-", i->nformals);
}
